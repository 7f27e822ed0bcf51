"""GroupTables: the live calibration of each row where a pool's rows fall into groups
(shared.live_groups: P/D role, hardware class), looked up once per call.

A row of a group with a live factor of its own is served that factor, any other row the
pool's; where a target's groups have blends with the level (shared.live_calibration), a
row of such a group is served its group's blend and any other row the answer alone. The
group of each row is found once per call and shared by both targets, the factors and the
blends: with a mask per group per target, two groups with factors and blends cost a
one-row LoadedBundle.predict 14 us over the pool's factor alone (37 against 23 us); found
once, 4 us (benchmarks/predict_references.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from shared.features import Columns, code_column
from shared.live_calibration import Blend
from shared.targets import Target

Codes = tuple[float, float]  # (pod_type_code, pod_class_code), as the rows carry them
# Up to this many rows a dict lookup per row beats a mask per group.
LOOKUP_MAX_ROWS = 16


@dataclass(frozen=True)
class GroupTables:
    """Per target, the factor (scales) and the blend (weights, levels) of position 0 (no
    group of its own) and of each group, in `positions` order."""

    positions: dict[Codes, int]
    scales: dict[Target, np.ndarray]
    weights: dict[Target, np.ndarray]
    levels: dict[Target, np.ndarray]

    @classmethod
    def build(
        cls,
        pool_scales: Mapping[Target, float],
        group_scales: Mapping[Target, Mapping[Codes, float]],
        group_blends: Mapping[Target, Mapping[Codes, Blend]],
    ) -> GroupTables:
        codes = sorted(
            {c for by in group_scales.values() for c in by}
            | {c for by in group_blends.values() for c in by}
        )
        positions = {c: k for k, c in enumerate(codes, start=1)}
        scales = {
            t: np.array([pool_scales[t], *(by.get(c, pool_scales[t]) for c in codes)])
            for t, by in group_scales.items()
            if by
        }
        none = Blend(1.0, 0.0)  # the answer alone
        blends = {t: [none, *(by.get(c, none) for c in codes)] for t, by in group_blends.items()}
        return cls(
            positions,
            scales,
            {t: np.array([b.weight for b in bs]) for t, bs in blends.items() if len(bs) > 1},
            {t: np.array([b.level_ms for b in bs]) for t, bs in blends.items() if len(bs) > 1},
        )

    def used_by(self, target: Target) -> bool:
        return target in self.scales or target in self.weights

    def index(self, columns: Columns, rows: int) -> np.ndarray:
        """The position of each row's group (0: none of the listed groups)."""
        roles = columns.get(code_column("pod_type"))
        classes = columns.get(code_column("pod_class"))
        if roles is None and classes is None:
            return np.zeros(rows, dtype=np.intp)
        roles = np.zeros(rows) if roles is None else roles
        classes = np.zeros(rows) if classes is None else classes
        if rows <= LOOKUP_MAX_ROWS:
            found = self.positions.get
            pairs = zip(roles.tolist(), classes.tolist(), strict=True)
            return np.fromiter((found(p, 0) for p in pairs), dtype=np.intp, count=rows)
        index = np.zeros(rows, dtype=np.intp)
        for (role, pod_class), position in self.positions.items():
            index[(roles == role) & (classes == pod_class)] = position
        return index

    def blended(self, target: Target, index: np.ndarray, ms: np.ndarray) -> np.ndarray:
        """`ms` of `target` blended with each row's group level (the answer alone where a
        row's group has no blend)."""
        weight = self.weights[target][index]
        out: np.ndarray = weight * ms + (1.0 - weight) * self.levels[target][index]
        return out
