"""GroupFactors: the live factor of each group of rows in a pool whose rows fall into
groups (shared.live_groups: P/D roles, hardware classes, or both).

One factor for the whole pool follows the pool's average miss rate: when one class slows
down (a noisy neighbour, a throttled GPU) its rows miss far more often than 1 - q while the
other classes' rows are covered more than enough, and the pool's factor lands in between;
a prefill pod's TTFT and a decode pod's blur alike. Each group seen in the rows therefore
gets a LiveFactor of its own per target, moved by that group's rows only, with the same
steps, shift test and rebase as the pool's (retrain.live_factor), and a ServedGap of its own
stepped on the p90s its rows were served (retrain.served_gap), and for the blended targets
a blend with its own level (retrain.level_blend). A group's factor starts
where the pool's stands when the group first appears (its gap at none), so a pool of a
single group serves exactly what the pool's factor would. Rows of no group keep the pool's factor.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from shared.live_calibration import TargetLiveCalibration
from shared.live_groups import group_name
from shared.targets import Target
from training_server.retrain.level_blend import (
    BLEND_TARGETS,
    LevelBlend,
    published_fields,
    resumed_blend,
)
from training_server.retrain.live_factor import BURST_WINDOW_TARGETS, LiveFactor, clamp
from training_server.retrain.served_gap import ServedGap

# Labels are open-ended: a client sending a new pod_class per row must not grow the
# leader's state or the file without bound. Groups past this many keep the pool's factor.
MAX_LIVE_GROUPS = 16
RECENT_ROWS = 1_000  # as the pool's recent_coverage


@dataclass(frozen=True)
class GroupRows:
    """The rows of one step that measure a target, with each row's group."""

    names: np.ndarray  # group name per row ("" for none), object array
    actual: np.ndarray
    answers: np.ndarray  # the bundle's answers without any live factor
    ids: np.ndarray


@dataclass(frozen=True)
class EppRows:
    """The rows of one step that carry the p90 the EPP acted on for a target."""

    names: np.ndarray  # group name per row ("" for none), object array
    actual: np.ndarray
    served: np.ndarray  # the p90 the EPP acted on
    by_model: np.ndarray  # served by a trained model, not the cold-start prior: the gap's rows


def group_names(
    pod_types: np.ndarray | None, pod_classes: np.ndarray | None, rows: int
) -> np.ndarray:
    """The group of each row from its stored labels (which may differ in case/spaces)."""
    types = pod_types if pod_types is not None else np.full(rows, "", dtype=object)
    classes = pod_classes if pod_classes is not None else np.full(rows, "", dtype=object)
    return np.array([group_name(t, c) for t, c in zip(types, classes, strict=True)], dtype=object)


class GroupFactors:
    """Per group, per target: a LiveFactor, and the published entry."""

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
            name: {
                t: LiveFactor(
                    quantile, step, e.factor_log_offset, burst_window=t in BURST_WINDOW_TARGETS
                )
                for t, e in targets.items()
            }
            for name, targets in self.entries.items()
        }
        self.gaps: dict[str, dict[Target, ServedGap]] = {
            name: {
                t: ServedGap(quantile, step, e.served_level, e.served_gap)
                for t, e in targets.items()
            }
            for name, targets in self.entries.items()
        }
        self.blends: dict[str, dict[Target, LevelBlend]] = {
            name: {t: resumed_blend(quantile, e) for t, e in targets.items() if t in BLEND_TARGETS}
            for name, targets in self.entries.items()
        }
        self._recent: dict[tuple[str, Target], deque[bool]] = {}

    def factor(self, name: str, target: Target, pool_log_offset: float) -> LiveFactor | None:
        """`name`'s factor for `target`, started at the pool's when new (its gap at none:
        the gap needs the group's own served rows); None past the cap."""
        targets = self.factors.get(name)
        if targets is None:
            if len(self.factors) >= MAX_LIVE_GROUPS:
                return None
            targets = self.factors[name] = {}
        if target not in targets:
            targets[target] = LiveFactor(
                self.quantile,
                self.step,
                pool_log_offset,
                burst_window=target in BURST_WINDOW_TARGETS,
            )
            self.gaps.setdefault(name, {})[target] = ServedGap(self.quantile, self.step)
            if target in BLEND_TARGETS:
                self.blends.setdefault(name, {})[target] = LevelBlend(self.quantile)
        return targets[target]

    def observe(
        self,
        target: Target,
        rows: GroupRows,
        pool_log_offset: float,
        epp: EppRows,
    ) -> list[str]:
        """Move each group's factor on its rows (`pool_log_offset`: the pool's factor these
        rows were scored against, where a new group starts) and its gap on what the EPP
        was served (`epp`, also for recent_coverage). Returns the groups whose factor
        found a shift."""
        shifted = []
        for name in sorted(set(rows.names.tolist()) - {""}):
            factor = self.factor(name, target, pool_log_offset)
            if factor is None:
                continue
            mine = rows.names == name
            gap = self.gaps[name][target]
            epp_mine = epp.names == name
            served = rows.answers[mine] * math.exp(factor.log_offset)
            if factor.observe(rows.actual[mine], served, rows.ids[mine]):
                shifted.append(name)
            blend = self.blends.get(name, {}).get(target)
            if blend is not None:
                as_served = served * math.exp(gap.log_offset)  # but for the blend
                blend.observe(rows.actual[mine], as_served, rows.ids[mine], factor.large_since)
            gap_rows = epp_mine & epp.by_model
            gap.observe(epp.actual[gap_rows], epp.served[gap_rows])
            recent = self._recent.setdefault((name, target), deque(maxlen=RECENT_ROWS))
            recent.extend((epp.actual[epp_mine] <= epp.served[epp_mine]).tolist())
            entry = self.entries.setdefault(name, {}).get(target, TargetLiveCalibration())
            blend_weight, blend_level_ms = published_fields(blend)
            self.entries[name][target] = TargetLiveCalibration(
                log_offset=clamp(factor.log_offset + gap.log_offset),
                served_gap=gap.log_offset,
                served_level=gap.level,
                rows=entry.rows + int(np.count_nonzero(mine)),
                recent_coverage=float(np.mean(recent)) if recent else None,
                blend_weight=blend_weight,
                blend_level_ms=blend_level_ms,
            )
        return shifted

    def rebased(self, name: str, target: Target) -> None:
        """Publish `name`'s factor for `target` after a rebase moved it."""
        entry = self.entries.setdefault(name, {}).get(target, TargetLiveCalibration())
        factor, gap = self.factors[name][target], self.gaps[name][target]
        served = clamp(factor.log_offset + gap.log_offset)
        self.entries[name][target] = entry.model_copy(update={"log_offset": served})

    def published(self) -> dict[str, dict[Target, TargetLiveCalibration]]:
        return {name: dict(targets) for name, targets in self.entries.items() if targets}
