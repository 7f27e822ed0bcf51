"""GroupTables: each row's group found once, by a lookup per row in small calls and by a
mask per group in large ones; both give the same positions, factors and blends."""

from __future__ import annotations

import numpy as np

from shared.features import code_column
from shared.live_calibration import Blend
from shared.served_groups import LOOKUP_MAX_ROWS, GroupTables
from shared.targets import Target

H200, B200, DECODE = (0.0, 3.0), (0.0, 7.0), (2.0, 0.0)


def tables() -> GroupTables:
    return GroupTables.build(
        {Target.TTFT: 1.5, Target.TPOT: 2.0},
        {Target.TTFT: {H200: 3.0}, Target.TPOT: {}},
        {Target.TPOT: {B200: Blend(0.25, 40.0), DECODE: Blend(0.5, 10.0)}},
    )


def columns(pairs: list[tuple[float, float]]) -> dict[str, np.ndarray]:
    return {
        code_column("pod_type"): np.array([p[0] for p in pairs]),
        code_column("pod_class"): np.array([p[1] for p in pairs]),
    }


def test_small_and_large_calls_find_the_same_groups() -> None:
    groups = tables()
    rng = np.random.default_rng(0)
    kinds = [H200, B200, DECODE, (0.0, 0.0), (1.0, 3.0)]
    pairs = [kinds[i] for i in rng.integers(0, len(kinds), 200)]
    large = groups.index(columns(pairs), len(pairs))
    small = np.concatenate(
        [
            groups.index(
                columns(pairs[i : i + LOOKUP_MAX_ROWS]), len(pairs[i : i + LOOKUP_MAX_ROWS])
            )
            for i in range(0, len(pairs), LOOKUP_MAX_ROWS)
        ]
    )
    assert large.tolist() == small.tolist()
    position = dict(zip(pairs, large.tolist(), strict=True))
    assert position[(0.0, 0.0)] == position[(1.0, 3.0)] == 0  # no group of theirs listed
    assert len({position[H200], position[B200], position[DECODE]}) == 3


def test_each_row_gets_its_groups_factor_and_blend_or_the_pools() -> None:
    groups = tables()
    pairs = [H200, B200, DECODE, (0.0, 0.0)]
    index = groups.index(columns(pairs), len(pairs))
    assert groups.scales[Target.TTFT][index].tolist() == [3.0, 1.5, 1.5, 1.5]
    assert Target.TPOT not in groups.scales  # no group factor: the pool's, one number
    ms = np.array([8.0, 8.0, 8.0, 8.0])
    blended = groups.blended(Target.TPOT, index, ms)
    assert blended.tolist() == [8.0, 0.25 * 8 + 0.75 * 40, 0.5 * 8 + 0.5 * 10, 8.0]
    assert groups.used_by(Target.TTFT) and groups.used_by(Target.TPOT)


def test_rows_without_group_columns_have_none() -> None:
    assert tables().index({}, 3).tolist() == [0, 0, 0]
