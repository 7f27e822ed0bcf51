"""SampleCounts: how many rows a pool's store holds, per split and per target.

A row measures one target or both (`measures`, bit 1 TTFT and bit 2 TPOT: 0 ms means "not
measured"), and sits in the training or the held-out split. The store counts them with one
grouped query; the routes answer them as llm-d's JSON (`as_json`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from shared.targets import TARGETS, Target

TARGET_BITS = {Target.TTFT: 1, Target.TPOT: 2}
SPLITS = {False: "training_data", True: "test_data"}  # is_test -> the JSON's name


def measures_bits(entry: Any) -> int:
    """The `measures` bits of a row: which of its actuals were measured (> 0 ms)."""
    return sum(bit for t, bit in TARGET_BITS.items() if getattr(entry, t.actual_field) > 0)


@dataclass(frozen=True)
class SplitCounts:
    """Rows of one split: those measuring each target, and all of them."""

    by_target: dict[Target, int] = field(default_factory=lambda: dict.fromkeys(TARGETS, 0))
    total: int = 0

    def plus(self, measures: int, rows: int) -> SplitCounts:
        """These counts with `rows` more rows of the given `measures` bits."""
        by_target = {
            t: n + (rows if measures & TARGET_BITS[t] else 0) for t, n in self.by_target.items()
        }
        return SplitCounts(by_target, self.total + rows)

    def as_json(self) -> dict[str, int]:
        return {
            **{f"{t.value}_samples": n for t, n in self.by_target.items()},
            "total_samples": self.total,
        }


@dataclass(frozen=True)
class SampleCounts:
    training: SplitCounts = field(default_factory=SplitCounts)
    test: SplitCounts = field(default_factory=SplitCounts)

    def split(self, is_test: bool) -> SplitCounts:
        return self.test if is_test else self.training

    def plus(self, groups: Iterable[tuple[bool, int, int]]) -> SampleCounts:
        """These counts with rows added, given as (is_test, measures, rows) groups."""
        counts = self
        for is_test, measures, rows in groups:
            grown = counts.split(is_test).plus(measures, rows)
            counts = replace(counts, **{"test" if is_test else "training": grown})
        return counts

    def without(self, *, training: bool, test: bool) -> SampleCounts:
        """These counts with the named splits emptied (a flush)."""
        return SampleCounts(
            SplitCounts() if training else self.training, SplitCounts() if test else self.test
        )

    def as_json(self) -> dict[str, dict[str, int]]:
        """{"training_data"|"test_data": {"ttft_samples", "tpot_samples", "total_samples"}}."""
        return {SPLITS[False]: self.training.as_json(), SPLITS[True]: self.test.as_json()}
