"""A pool that changes during a run: pods that join it and classes that slow down.

`--join CLASS:COUNT@SECONDS` (repeatable): COUNT pods of hardware class CLASS join the pool
at simulated second SECONDS, as an autoscaler adds them. They exist from the start, with
indices after the initial pods' (joins in order of their time, then of the flags), so every
per-pod figure indexes the same pod for the whole run; but before SECONDS no policy sees
them (they are not in the features `choose` gets) and neither the oracle's nor the regret
meter's look-aheads count them. From SECONDS on they are ordinary pods, empty and with a
cold prefix cache. Since pods join in index order, the live pods are always the first ones
(`PoolTimeline.live_count`), so an index means the same pod to a policy throughout.

`--slowdown CLASS:FACTOR@SECONDS` (repeatable): from SECONDS on every pod of class CLASS
(joined or not yet) runs its steps FACTOR times slower (a noisy neighbour, a throttled
GPU): its step floor and its per-token, per-KV-token and attention costs are multiplied by
FACTOR; the class keeps its name, so only a model that learns from the measured rows can
follow. A step already running finishes at its old length. Slowdowns of the same class
compound (1.5, then 1/1.5 later: back to the original speed). They are engine events
(poolsim.engine), applied before any arrival or step end at the same instant.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from poolsim.hardware import HARDWARE, Hardware, pool_label

if TYPE_CHECKING:
    from poolsim.pod import Pod

JOIN_HELP = (
    "CLASS:COUNT@SECONDS: COUNT pods of hardware CLASS join the pool at simulated second "
    "SECONDS (an autoscaler); no policy sees them before (repeatable)"
)
SLOWDOWN_HELP = (
    "CLASS:FACTOR@SECONDS: from simulated second SECONDS every pod of CLASS runs its steps "
    "FACTOR times slower (a noisy neighbour; the class keeps its name; repeatable, compounds)"
)


class PoolChangeError(ValueError):
    """A `--join` or `--slowdown` value that names no change (the message says why)."""


@dataclass(frozen=True, slots=True)
class PodJoin:
    """`count` pods of `hw` join the pool at simulated second `at_s`."""

    hw: Hardware
    count: int
    at_s: float


@dataclass(frozen=True, slots=True)
class Slowdown:
    """From simulated second `at_s`, pods of class `class_name` step `factor` times slower."""

    class_name: str
    factor: float
    at_s: float

    def apply(self, hw: Hardware) -> Hardware:
        """`hw` with its step-time constants multiplied by the factor (name unchanged)."""
        return replace(
            hw,
            step_floor_ms=hw.step_floor_ms * self.factor,
            ms_per_token=hw.ms_per_token * self.factor,
            ms_per_kv_ktoken=hw.ms_per_kv_ktoken * self.factor,
            ms_per_attn_mtoken=hw.ms_per_attn_mtoken * self.factor,
        )


@dataclass(frozen=True, slots=True)
class PoolChanges:
    """Every change of one run, each kind in time order (ties: in the order given)."""

    joins: tuple[PodJoin, ...] = ()
    slowdowns: tuple[Slowdown, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "joins", tuple(sorted(self.joins, key=lambda j: j.at_s)))
        object.__setattr__(self, "slowdowns", tuple(sorted(self.slowdowns, key=lambda s: s.at_s)))

    def pool(self, initial: Sequence[Hardware]) -> list[Hardware]:
        """Every pod's class in index order: the initial pods, then the joining ones."""
        pods = list(initial)
        for join in self.joins:
            pods += [join.hw] * join.count
        return pods

    def join_indices(self, initial: int) -> list[list[int]]:
        """Per join (in order), the indices of its pods."""
        out: list[list[int]] = []
        start = initial
        for join in self.joins:
            out.append(list(range(start, start + join.count)))
            start += join.count
        return out

    def to_json(self, initial: Sequence[Hardware]) -> dict[str, list[dict[str, object]]]:
        """What `--json` echoes: each join and slowdown with the pods it applies to."""
        classes = [hw.name for hw in self.pool(initial)]
        joins: list[dict[str, object]] = [
            {"class": join.hw.name, "count": join.count, "at_s": join.at_s, "pods": pods}
            for join, pods in zip(self.joins, self.join_indices(len(initial)), strict=True)
        ]
        slowdowns: list[dict[str, object]] = [
            {
                "class": slow.class_name,
                "factor": slow.factor,
                "at_s": slow.at_s,
                "pods": [i for i, name in enumerate(classes) if name == slow.class_name],
            }
            for slow in self.slowdowns
        ]
        return {"joins": joins, "slowdowns": slowdowns}

    def describe(self) -> str:
        """One line for the command's header ("" without changes)."""
        parts = [f"join {j.hw.name}:{j.count}@{j.at_s:g}s" for j in self.joins]
        parts += [f"slowdown {s.class_name}:x{s.factor:g}@{s.at_s:g}s" for s in self.slowdowns]
        return ", ".join(parts)


class PoolTimeline:
    """The engine's view of the changes: how many pods are live at an instant (the first
    ones) and the slowdowns still to apply, in time order."""

    def __init__(self, changes: PoolChanges, initial: int) -> None:
        self._live = initial
        self._joins = list(changes.joins)
        self._next_join = 0
        self._slowdowns = list(changes.slowdowns)
        self._next_slowdown = 0

    def live_count(self, now_s: float) -> int:
        """Pods live at now_s (times only move forward): the first this many."""
        joins = self._joins
        while self._next_join < len(joins) and joins[self._next_join].at_s <= now_s:
            self._live += joins[self._next_join].count
            self._next_join += 1
        return self._live

    def slowdown_due(self, *next_times: float | None) -> bool:
        """A slowdown is due at or before every one of the next event times (None: none)."""
        if self._next_slowdown >= len(self._slowdowns):
            return False
        at = self._slowdowns[self._next_slowdown].at_s
        return all(t is None or at <= t for t in next_times)

    def apply_slowdown(self, pods: Sequence[Pod]) -> float:
        """Apply the next slowdown to every pod of its class; returns its time."""
        slow = self._slowdowns[self._next_slowdown]
        self._next_slowdown += 1
        for pod in pods:
            if pod.hw.name == slow.class_name:
                pod.hw = slow.apply(pod.hw)
        return slow.at_s


def _split(flag: str, spec: str, what: str) -> tuple[Hardware, str, float]:
    """CLASS, the text after ':', and the seconds after '@' of a `CLASS:X@SECONDS` value."""
    body, at, seconds_text = spec.strip().rpartition("@")
    if not at:
        raise PoolChangeError(f"{flag} {spec!r}: missing '@SECONDS'; expected CLASS:{what}@SECONDS")
    name, colon, value = body.partition(":")
    if not colon:
        raise PoolChangeError(f"{flag} {spec!r}: missing ':'; expected CLASS:{what}@SECONDS")
    name = name.strip()
    if name not in HARDWARE:
        raise PoolChangeError(
            f"{flag} {spec!r}: unknown hardware class {name!r}; known: {', '.join(HARDWARE)}"
        )
    seconds = _number(seconds_text)
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        raise PoolChangeError(
            f"{flag} {spec!r}: the time must be a number of seconds >= 0, not {seconds_text!r}"
        )
    return HARDWARE[name], value.strip(), seconds


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def parse_join(spec: str) -> PodJoin:
    """`b200:2@120` -> PodJoin(B200, 2, 120.0); PoolChangeError naming the problem."""
    hw, count_text, at_s = _split("--join", spec, "COUNT")
    try:
        count = int(count_text)
    except ValueError:
        count = 0
    if count < 1:
        raise PoolChangeError(
            f"--join {spec!r}: the count must be an integer >= 1, not {count_text!r}"
        )
    return PodJoin(hw, count, at_s)


def parse_slowdown(spec: str) -> Slowdown:
    """`h200:1.5@180` -> Slowdown("h200", 1.5, 180.0); PoolChangeError naming the problem."""
    hw, factor_text, at_s = _split("--slowdown", spec, "FACTOR")
    factor = _number(factor_text)
    if factor is None or not math.isfinite(factor) or factor <= 0:
        raise PoolChangeError(
            f"--slowdown {spec!r}: the factor must be a number > 0, not {factor_text!r}"
        )
    return Slowdown(hw.name, factor, at_s)


def parse_pool_changes(
    joins: Sequence[str], slowdowns: Sequence[str], initial: Sequence[Hardware]
) -> PoolChanges:
    """The changes of the `--join` and `--slowdown` values on the pool `initial`; a
    slowdown must name a class some pod has (initial or joining)."""
    parsed = [parse_slowdown(spec) for spec in slowdowns]
    changes = PoolChanges(tuple(parse_join(spec) for spec in joins), tuple(parsed))
    pool = changes.pool(initial)
    classes = {hw.name for hw in pool}
    for spec, slow in zip(slowdowns, parsed, strict=True):
        if slow.class_name not in classes:
            raise PoolChangeError(
                f"--slowdown {spec!r}: no pod of class {slow.class_name} in the pool "
                f"({pool_label(pool)}); add some with --join {slow.class_name}:COUNT@SECONDS"
            )
    return changes
