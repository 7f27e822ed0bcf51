"""Rows that arrive between the live factor's last step and a retrain's start: scored against
the bundle that served them, before the new bundle's rebase.

A retrain reads every stored row up to its start. The leader's step runs on the loop's
thread, when rows arrive and on its clock, so rows stored after the last step (or while an
earlier retrain of the pass ran) are in the new bundle's training sample by the time the
step sees them. The step cannot score them against the new bundle (a fit answers its own
rows too well), but they were served by the previous one, which never saw them. Left out,
they are lost to the factor: 8 % of the rows of an online chatbot replay when the step ran
only once a second (whole batches, and in the first minute, while retrains come after 1, 2,
4 and 8 seconds, one batch in every few), and the rebase that follows then gives back a
move the factor never made. So they are scored against the previous bundle first, with the
factor in force, as the in-process replay scores every row (benchmarks/replay/inprocess.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from shared.live_calibration import NO_LIVE_OFFSETS
from shared.predictor import LoadedBundle
from shared.targets import TARGETS, Target
from training_server.retrain.level_blend import LevelBlend
from training_server.retrain.live_factor import LiveFactor
from training_server.retrain.live_groups import EppRows, GroupFactors, GroupRows, group_names
from training_server.store import ServedRows


@dataclass(frozen=True)
class Shifted:
    """A factor that found a shift on the late rows ("" group: the pool's own)."""

    target: Target
    group: str
    factor: LiveFactor


def late_rows(rows: ServedRows, after_id: int, through_id: int) -> np.ndarray:
    """The mask of `rows` the previous bundle served and the new one was trained on: ids in
    (after_id, through_id], after_id being the newest row the previous bundle saw."""
    return (rows.ids > after_id) & (rows.ids <= through_id)


def observe_late(
    rows: ServedRows,
    late: np.ndarray,
    previous: LoadedBundle,
    factors: dict[Target, LiveFactor],
    groups: GroupFactors,
    blends: dict[Target, tuple[LevelBlend, float]] | None = None,
) -> list[Shifted]:
    """Move the pool's and each group's factor, and blend with the level, on the `late` rows
    as `previous` answers them (`blends`: the pool's per target, with its gap's log-factor;
    the gap and recent_coverage count every row already, whichever bundle: not here)."""
    if not late.any():
        return []
    columns = {name: values[late] for name, values in rows.columns.items()}
    answers = previous.with_live(NO_LIVE_OFFSETS).predict(columns)
    ids = rows.ids[late]
    names = group_names(columns.get("pod_type"), columns.get("pod_class"), len(ids))
    no_epp = EppRows(names[:0], np.empty(0), np.empty(0), np.zeros(0, dtype=bool))
    shifted: list[Shifted] = []
    for target in TARGETS:
        actual = rows.actual[target][late]
        measured = actual > 0
        if not measured.any() or not previous.has_model(target):
            continue
        factor = factors[target]
        pool_log_offset = factor.log_offset
        answer = answers[target][measured]
        served = answer * math.exp(factor.log_offset)
        if factor.observe(actual[measured], served, ids[measured]):
            shifted.append(Shifted(target, "", factor))
        if (blend := (blends or {}).get(target)) is not None:
            pool_blend, gap_log_offset = blend
            as_served = served * math.exp(gap_log_offset)
            pool_blend.observe(actual[measured], as_served, ids[measured], factor.large_since)
        group_rows = GroupRows(names[measured], actual[measured], answer, ids[measured])
        for name in groups.observe(target, group_rows, pool_log_offset, no_epp):
            shifted.append(Shifted(target, name, groups.factors[name][target]))
    return shifted
