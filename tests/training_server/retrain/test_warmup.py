"""The retrain schedule: the clock, and early retrains while the data is small."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

import pytest

from devkit.synthetic import synthetic_rows
from shared.schemas import TrainingEntry
from tests.conftest import training_settings
from tests.polling import eventually
from tests.slots import RecordingSlot
from training_server.metrics import TrainingMetrics
from training_server.retrain.live_calibration import LiveCalibrator
from training_server.retrain.loop import PoolsLoop
from training_server.retrain.retrainer import Retrainer
from training_server.retrain.schedule import MIN_ROWS, WARMUP_ROWS, WARMUP_TICK_SEC, RetrainSchedule
from training_server.store import SampleStore


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def retrained_at(schedule: RetrainSchedule, counts: list[int]) -> list[int]:
    """The row counts at which the schedule retrains, one tick per count, no time passing."""
    out = []
    for rows in counts:
        if schedule.due(rows):
            schedule.started(rows)
            out.append(rows)
    return out


def test_early_retrains_come_each_time_the_rows_double() -> None:
    schedule = RetrainSchedule(10.0, clock=FakeClock())
    assert retrained_at(schedule, list(range(0, 200, 5))) == [20, 40, 80, 160]
    assert not schedule.due(0)  # nothing new, the clock not due


def test_the_clock_retrains_whatever_the_rows() -> None:
    clock = FakeClock()
    schedule = RetrainSchedule(10.0, clock=clock)
    assert not schedule.due(MIN_ROWS - 1)
    clock.now += 10.0
    assert schedule.due(0)
    schedule.started(0)
    clock.now += 9.9
    assert not schedule.due(0)


def test_the_warm_up_ends_after_a_retrain_on_warmup_rows() -> None:
    clock = FakeClock()
    schedule = RetrainSchedule(10.0, clock=clock)
    assert schedule.warming_up and schedule.wait() == WARMUP_TICK_SEC
    schedule.started(WARMUP_ROWS)
    assert not schedule.warming_up
    assert not schedule.due(10 * WARMUP_ROWS)  # doubling no longer counts
    assert schedule.wait() == pytest.approx(10.0)  # the loop sleeps until the clock
    clock.now += 4.0
    assert schedule.wait() == pytest.approx(6.0)


def test_without_early_retrains_only_the_clock_decides() -> None:
    schedule = RetrainSchedule(10.0, early=False, clock=FakeClock())
    assert retrained_at(schedule, [20, 40, 80, 1000]) == []
    assert schedule.wait() == pytest.approx(10.0)


@dataclass(frozen=True)
class OnePool:
    name: str
    retrainer: Retrainer
    calibrator: LiveCalibrator


def test_the_retrain_loop_trains_early_on_a_real_store(
    tmp_path: Path, store: SampleStore, migrated_url: str
) -> None:
    """With a 60 s clock the first model still lands within a few ticks of the first rows,
    and the next one soon after the rows doubled."""
    settings = training_settings(
        tmp_path, migrated_url, retraining_interval_sec=60.0, early_retrains=True
    )
    metrics, slot = TrainingMetrics(), RecordingSlot(settings)
    retrainer = Retrainer(settings, store, metrics, slot)
    calibrator = LiveCalibrator(settings, store, metrics, slot, lambda: retrainer.is_leader)
    pool = OnePool("default", retrainer, calibrator)
    loop = PoolsLoop(
        lambda: [pool],
        retrainer.leadership,
        calibration_interval_sec=settings.calibration_interval_sec,
        wake=threading.Event(),
    )
    loop.start()
    try:
        store.add_samples([TrainingEntry.model_validate(r) for r in synthetic_rows(30, seed=1)])
        eventually(lambda: len(store.list_retrains()) >= 1, 15, "the first retrain, early")
        store.add_samples([TrainingEntry.model_validate(r) for r in synthetic_rows(40, seed=2)])
        eventually(lambda: len(store.list_retrains()) >= 2, 15, "a retrain once rows doubled")
    finally:
        loop.stop()
    rows = store.list_retrains()
    assert [r.status for r in rows] == ["ok", "ok"]
    assert [r.max_sample_id for r in rows] == [70, 30]
