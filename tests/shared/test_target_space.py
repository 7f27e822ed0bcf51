"""The fitting spaces and the way back to ms, against values worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from shared.target_space import TargetSpace, space_for, to_label, to_ms
from shared.targets import Target

COLUMNS = {"num_request_waiting": np.array([0.0, 1.0, 9.0])}
MS = np.array([50.0, 200.0, 1000.0])


def test_labels_by_hand() -> None:
    np.testing.assert_allclose(to_label(TargetSpace.MS, COLUMNS, MS), MS)
    np.testing.assert_allclose(
        to_label(TargetSpace.LOG_MS, COLUMNS, MS), [math.log(50), math.log(200), math.log(1000)]
    )
    # ms per queued request: 50 / 1, 200 / 2, 1000 / 10
    np.testing.assert_allclose(
        to_label(TargetSpace.LOG_MS_PER_QUEUED, COLUMNS, MS),
        [math.log(50), math.log(100), math.log(100)],
    )


@pytest.mark.parametrize("space", list(TargetSpace))
def test_to_ms_inverts_to_label(space: TargetSpace) -> None:
    np.testing.assert_allclose(to_ms(space, COLUMNS, to_label(space, COLUMNS, MS)), MS)


def test_a_constant_output_grows_with_the_queue() -> None:
    """What lets TTFT keep up with a queue longer than any seen: one leaf value, 10x queue."""
    output = np.full(3, math.log(100.0))
    np.testing.assert_allclose(
        to_ms(TargetSpace.LOG_MS_PER_QUEUED, COLUMNS, output), [100.0, 200.0, 1000.0]
    )


def test_a_zero_actual_never_becomes_minus_infinity() -> None:
    assert np.isfinite(to_label(TargetSpace.LOG_MS, COLUMNS, np.zeros(3))).all()


def test_spaces_of_new_models() -> None:
    assert space_for(Target.TTFT) is TargetSpace.LOG_MS_PER_QUEUED
    assert space_for(Target.TPOT) is TargetSpace.LOG_MS
