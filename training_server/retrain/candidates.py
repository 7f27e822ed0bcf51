"""The models a retrain chooses among, per target (retrain.select picks one by its loss).

Every candidate is one native model file plus a space and a factor, so whichever wins is
served by the same bundle format and prediction path:
- "p90": the running p90 of the target's rows, a model without trees (in log ms, so it is
  exactly the quantile of the actuals). It is what a model must beat to be served.
- "p90_per_queued" (TTFT): the p90 of ms per queued request, which still scales with the
  queue, also without trees.
- trees ("trees_<n>x<depth>"): quantile boosting in the target's space (TTFT per queued
  request, TPOT log ms) with the configured hyperparameters, and a sharper variant that
  steps further per tree (learning rate 0.3), which fits long-prompt, heavy-queue regimes
  the configured one underfits (benchmarks/README.md). Its leaves hold 50 TTFT rows, so a
  leaf's p90 rests on at least 5 rows above it (with 20, a leaf fitted a burst of 8 stalled
  requests, sharegpt rows 536-543, and over-predicted the next ~500), and 20 TPOT rows
  (TPOT has no such outliers; 50 cost the chatbot trace 5-13 % online).
Trees compete only from LATENCY_MIN_SAMPLES_FOR_RETRAIN rows, the sharp variant only from
SHARP_FROM_ROWS: each candidate costs a retrain one fit per fold, and many pools share one
core (retrain.loop).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from shared.backends import FitParams
from shared.settings import TrainingSettings
from shared.target_space import TargetSpace, space_for
from shared.targets import Target


@dataclass(frozen=True)
class Candidate:
    name: str
    space: TargetSpace
    n_estimators: int | None = None  # None: the settings'; 0: the start alone (a quantile)
    learning_rate: float | None = None
    min_rows_per_leaf: int | None = None

    def params(self, base: FitParams) -> FitParams:
        """`base` (the settings' parameters for the target) with this candidate's changes."""
        changes: dict[str, float | int] = {}
        for name in ("n_estimators", "learning_rate", "min_rows_per_leaf"):
            value = getattr(self, name)
            if value is not None:
                changes[name] = value
        return replace(base, **changes)  # type: ignore[arg-type]

    @property
    def has_trees(self) -> bool:
        return self.n_estimators != 0


P90 = Candidate("p90", TargetSpace.LOG_MS, n_estimators=0)
P90_PER_QUEUED = Candidate("p90_per_queued", TargetSpace.LOG_MS_PER_QUEUED, n_estimators=0)
SHARP_LEARNING_RATE = 0.3
SHARP_MIN_ROWS_PER_LEAF = {Target.TTFT: 50, Target.TPOT: 20}
# Below this many rows the sharp variant does not compete. On the replays (3 seeds of each
# trace, every retrain's out-of-fold losses) it won TTFT only from 822 rows, and TPOT in 5
# of 18 choices below 500 rows (~70 chatbot rows, ~350 sharegpt), where the replays score
# better without it: TPOT's ratio to the naive p90 1.00 -> 0.96 (chatbot), 0.95 -> 0.94
# (sharegpt), TTFT the same. Offered only from 1,200 rows it cost sharegpt TTFT (ratio in
# the 2nd half 0.50 -> 0.69).
SHARP_FROM_ROWS = 500


def candidates(
    target: Target, settings: TrainingSettings, rows: int, *, select: bool = True
) -> list[Candidate]:
    """What a retrain on `rows` rows of `target` chooses among (first = preferred on a tie).
    `select` off: the configured trees alone (or the p90 below the trees' minimum)."""
    constants = [P90, P90_PER_QUEUED] if target is Target.TTFT else [P90]
    trees = Candidate(f"trees_{settings.n_estimators}x{settings.max_depth}", space_for(target))
    if rows < settings.min_samples_for_retrain:
        return constants if select else [constants[-1]]
    if not select:
        return [trees]
    if rows < SHARP_FROM_ROWS:
        return [*constants, trees]
    sharp = Candidate(
        f"{trees.name}_sharp",
        space_for(target),
        learning_rate=SHARP_LEARNING_RATE,
        min_rows_per_leaf=SHARP_MIN_ROWS_PER_LEAF[target],
    )
    return [*constants, trees, sharp]
