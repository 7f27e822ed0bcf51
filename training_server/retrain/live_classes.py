"""ClassFactors: the live factor of each hardware class in a pool that mixes them.

One factor for the whole pool follows the pool's average miss rate: when one class slows
down (a noisy neighbour, a throttled GPU) its rows miss far more often than 1 - q while the
other classes' rows are covered more than enough, and the pool's factor lands in between.
Each class seen in the rows (`pod_class`, normalised) therefore gets a LiveFactor of its
own per target, moved by that class's rows only, with the same steps, shift test and
rebase as the pool's (retrain.live_factor). A class's factor starts where the pool's stands
when the class first appears, so a pool of a single class serves exactly what the pool's
factor would. Rows without a class keep the pool's factor.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from shared.features import normalized_pod_class
from shared.live_calibration import TargetLiveCalibration
from shared.targets import Target
from training_server.retrain.live_factor import LiveFactor

# Labels are open-ended: a client sending a new pod_class per row must not grow the
# leader's state or the file without bound. Classes past this many keep the pool's factor.
MAX_LIVE_CLASSES = 16
RECENT_ROWS = 1_000  # as the pool's recent_coverage


@dataclass(frozen=True)
class ClassRows:
    """The rows of one step that measure a target, with each row's class."""

    names: np.ndarray  # normalised class label per row ("" for none), object array
    actual: np.ndarray
    answers: np.ndarray  # the bundle's answers without any live factor
    ids: np.ndarray


def class_names(raw: np.ndarray | None, rows: int) -> np.ndarray:
    """The normalised class label of each row (stored labels may differ in case/spaces)."""
    if raw is None:
        return np.full(rows, "", dtype=object)
    return np.array([normalized_pod_class(v) for v in raw], dtype=object)


class ClassFactors:
    """Per class, per target: a LiveFactor, and the published entry."""

    def __init__(
        self,
        quantile: float,
        step: float,
        published: dict[str, dict[Target, TargetLiveCalibration]] | None = None,
    ):
        self.quantile, self.step = quantile, step
        self.entries: dict[str, dict[Target, TargetLiveCalibration]] = {
            name: dict(targets) for name, targets in (published or {}).items()
        }
        self.factors: dict[str, dict[Target, LiveFactor]] = {
            name: {t: LiveFactor(quantile, step, e.log_offset) for t, e in targets.items()}
            for name, targets in self.entries.items()
        }
        self._recent: dict[tuple[str, Target], deque[bool]] = {}

    def factor(self, name: str, target: Target, pool_log_offset: float) -> LiveFactor | None:
        """`name`'s factor for `target`, started at the pool's when new; None past the cap."""
        targets = self.factors.get(name)
        if targets is None:
            if len(self.factors) >= MAX_LIVE_CLASSES:
                return None
            targets = self.factors[name] = {}
        if target not in targets:
            targets[target] = LiveFactor(self.quantile, self.step, pool_log_offset)
        return targets[target]

    def observe(
        self,
        target: Target,
        rows: ClassRows,
        pool_log_offset: float,
        epp: tuple[np.ndarray, np.ndarray, np.ndarray],
    ) -> list[str]:
        """Move each class's factor on its rows (`pool_log_offset`: the pool's factor these
        rows were scored against, where a new class starts); `epp` is (class, actual,
        served p90) of what the EPP was served, for recent_coverage. Returns the classes
        whose factor found a shift."""
        shifted = []
        for name in sorted(set(rows.names.tolist()) - {""}):
            factor = self.factor(name, target, pool_log_offset)
            if factor is None:
                continue
            mine = rows.names == name
            served = rows.answers[mine] * math.exp(factor.log_offset)
            if factor.observe(rows.actual[mine], served, rows.ids[mine]):
                shifted.append(name)
            recent = self._recent.setdefault((name, target), deque(maxlen=RECENT_ROWS))
            epp_names, epp_actual, epp_served = epp
            epp_mine = epp_names == name
            recent.extend((epp_actual[epp_mine] <= epp_served[epp_mine]).tolist())
            entry = self.entries.setdefault(name, {}).get(target, TargetLiveCalibration())
            self.entries[name][target] = TargetLiveCalibration(
                log_offset=factor.log_offset,
                rows=entry.rows + int(np.count_nonzero(mine)),
                recent_coverage=float(np.mean(recent)) if recent else None,
            )
        return shifted

    def rebased(self, name: str, target: Target) -> None:
        """Publish `name`'s factor for `target` after a rebase moved it."""
        entry = self.entries.setdefault(name, {}).get(target, TargetLiveCalibration())
        factor = self.factors[name][target]
        self.entries[name][target] = entry.model_copy(update={"log_offset": factor.log_offset})

    def published(self) -> dict[str, dict[Target, TargetLiveCalibration]]:
        return {name: dict(targets) for name, targets in self.entries.items() if targets}
