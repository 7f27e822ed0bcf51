"""Which held-out rows a rebase compares two bundles on (retrain.live_factor.rebase).

A rebase moves the live factor by how much less (or more) the new bundle needs than the
old one to cover the same rows. Held-out rows were fitted by neither bundle, but the new
one was fitted on their neighbours in time: the training rows stored around them, which
in TTFT's queue ramps have the same features and nearly the same latencies. On rows newer
than the old bundle's training the new one so looks better than it will be on the next
rows. After a 1.2x drift of chatbot's TTFT every retrain answered within 1-3 % of the one
before at the median, yet "needed" 0.12-0.17 less in log on those rows; the rebase took
the factor down by that much, the next batches missed (9 of 9, 9 of 14, 13 of 15), and a
shift put it back, once a retrain (benchmarks/README.md, "A rebase on rows both bundles
were fitted around").

So for NEIGHBOUR_FAIR_TARGETS the rows come from before the old bundle's training
watermark, where both bundles had the neighbours: those of the factor's level, else the
newest REBASE_MIN_ROWS whatever their level (a drift's retrains come every ~10 s, and
chatbot's shifts nearly as often). Where fewer are there (a young pool, whose first
bundles saw a few hundred rows) the rule falls back to the newest rows: without that
fallback sharegpt's first quarter lost (TTFT 0.92 -> 1.12 of the naive p90, seed 0). TPOT
keeps the newest rows: its factor follows its level by other means (retrain.level_blend,
fits since a large shift), and the rule was not measured on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from shared.targets import Target

# A new bundle is compared with the previous one on this many held-out rows of the level
# the factor follows (since its last shift), and on the newest REBASE_MIN_ROWS whatever
# their level where fewer have arrived since (a 0.9 quantile of fewer rows is too rough
# to move the factor by).
REBASE_ROWS = 200
REBASE_MIN_ROWS = 50
NEIGHBOUR_FAIR_TARGETS = frozenset({Target.TTFT})


@dataclass(frozen=True, slots=True)
class RowsAsked:
    """The newest `limit` held-out rows with since_id <= id (<= through_id, if set)."""

    since_id: int
    through_id: int | None
    limit: int


def rebase_asks(target: Target, level_since: int, old_through: int) -> Iterator[RowsAsked]:
    """The windows to try in order: the first with REBASE_MIN_ROWS rows or more is the one
    (the last whatever it holds). `level_since`: the first row of the factor's level;
    `old_through`: the newest row id the old bundle was trained on (0: not known)."""
    if target in NEIGHBOUR_FAIR_TARGETS and old_through > 0:
        yield RowsAsked(level_since, old_through, REBASE_ROWS)
        yield RowsAsked(0, old_through, REBASE_MIN_ROWS)
    yield RowsAsked(level_since, None, REBASE_ROWS)
    yield RowsAsked(0, None, REBASE_MIN_ROWS)
