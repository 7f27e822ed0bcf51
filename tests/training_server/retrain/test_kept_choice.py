"""A retrain behind its interval keeps each target's last model choice: the same candidate,
refitted on the new rows with the factor it was chosen with (retrain.target.KeptChoice),
and the retrain loop asks for it when a pool's tick comes late or the loop is busy
(retrain.loop); the loop also rebases the live factors onto each bundle a retrain
published at once."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from shared.live_calibration import read_live_calibration
from shared.targets import TARGETS
from tests.polling import eventually
from tests.training_server.retrain.test_retrainer import add, make
from training_server.retrain.live_calibration import LiveCalibrator
from training_server.retrain.loop import BUSY_SHARE, LATE_SHARE, PoolsLoop, keeps_choice
from training_server.retrain.retrainer import Retrainer
from training_server.retrain.target import KEEP_ROWS_RATIO
from training_server.store import SampleStore


def test_a_kept_choice_is_refitted_and_made_again_when_the_rows_moved(
    tmp_path: Path, store: SampleStore, migrated_url: str
) -> None:
    retrainer, published, _ = make(tmp_path, store, migrated_url, early_retrains=False)
    add(store, 400, seed=1)
    assert retrainer.run_once() == "ok"
    chosen = dict(retrainer.choices)
    first = store.list_retrains()[0]
    assert all(first.model_candidates and first.model_candidates[t.value] for t in TARGETS)

    add(store, 40, seed=2)
    assert retrainer.run_once(keep_choices=True) == "ok"
    kept = store.list_retrains()[0]
    assert kept.model_candidates == {t.value: {} for t in TARGETS}  # no choice was made
    assert kept.max_sample_id > first.max_sample_id and len(published) == 2
    for target in TARGETS:
        assert kept.target(target).model_choice == chosen[target].name
        assert published[-1].log_offsets.get(target, 0.0) == published[0].log_offsets.get(
            target, 0.0
        )
    assert retrainer.choices == chosen

    # Past KEEP_ROWS_RATIO more rows the choice is made again, even when asked to keep it.
    add(store, int(440 * KEEP_ROWS_RATIO), seed=3)
    assert retrainer.run_once(keep_choices=True) == "ok"
    again = store.list_retrains()[0]
    assert all(again.model_candidates and again.model_candidates[t.value] for t in TARGETS)


@dataclass(frozen=True)
class OnePool:
    name: str
    retrainer: Retrainer
    calibrator: LiveCalibrator


def one_pool_loop(
    tmp_path: Path, store: SampleStore, url: str, interval: float
) -> tuple[Retrainer, PoolsLoop]:
    """The default pool's retrainer (no early retrains, `interval`) under a PoolsLoop."""
    retrainer, _, metrics = make(
        tmp_path, store, url, early_retrains=False, retraining_interval_sec=interval
    )
    calibrator = LiveCalibrator(
        retrainer.settings, store, metrics, retrainer.slot, lambda: retrainer.is_leader
    )
    pool = OnePool("default", retrainer, calibrator)
    loop = PoolsLoop(
        lambda: [pool], retrainer.leadership, calibration_interval_sec=60, wake=threading.Event()
    )
    return retrainer, loop


def test_the_loop_counts_its_busy_share_and_a_busy_tick_keeps_the_choice(
    tmp_path: Path, store: SampleStore, migrated_url: str
) -> None:
    retrainer, loop = one_pool_loop(tmp_path, store, migrated_url, interval=0.01)
    add(store, 400, seed=4)
    loop.run_due()  # the first tick elects
    assert loop.busy_share(3600.0) < 0.01
    eventually(lambda: loop.run_due() >= 0 and len(store.list_retrains()) == 1, 10.0, "a retrain")
    duration = store.list_retrains()[0].duration_s
    assert loop.busy_share(3600.0) >= duration / 3600.0  # the retrain's tick, counted
    assert loop.busy_share(1e-9) == 0.0  # and forgotten once out of the window

    add(store, 40, seed=5)
    retrainer.tick(behind=True)  # what the loop asks past BUSY_SHARE
    (late, _first) = store.list_retrains()
    assert late.model_candidates == {t.value: {} for t in TARGETS}
    assert 0 < BUSY_SHARE < 1


def test_a_pool_chooses_only_on_time_with_the_loop_idle_and_no_pool_delayed() -> None:
    interval = 10.0
    on_time, late = LATE_SHARE * interval / 2, LATE_SHARE * interval * 2
    idle, busy = BUSY_SHARE / 2, (1 + BUSY_SHARE) / 2
    ends_before, delays_the_next = -1.0, late
    assert not keeps_choice(on_time, idle, interval, ends_before)
    assert not keeps_choice(on_time, idle, interval, on_time)  # within the tolerance
    assert keeps_choice(on_time, busy, interval, ends_before)  # choose in spare time only
    assert keeps_choice(late, idle, interval, ends_before)  # catch up first
    assert keeps_choice(on_time, idle, interval, delays_the_next)  # would make a queue
    assert keeps_choice(late, busy, interval, delays_the_next)


def test_a_late_tick_keeps_the_choice_even_when_the_loop_is_idle(
    tmp_path: Path, store: SampleStore, migrated_url: str
) -> None:
    interval = 0.01
    _, loop = one_pool_loop(tmp_path, store, migrated_url, interval=interval)
    add(store, 400, seed=6)
    loop.run_due()  # the first tick elects
    eventually(lambda: loop.run_due() >= 0 and len(store.list_retrains()) == 1, 10.0, "a retrain")
    # A pool alone is never behind for the loop's busy time: that time is its own.
    assert loop.busy_share(3600.0) > 0.0
    assert loop.busy_share(3600.0, excluding="default") == 0.0
    add(store, 40, seed=7)
    # Idle for 50 intervals: the tick is late by at least that, the loop's last interval idle.
    time.sleep(50 * interval)
    assert loop.busy_share(interval) == 0.0
    loop.run_due()
    (late, first) = store.list_retrains()
    assert first.model_candidates and all(first.model_candidates.values())  # chosen
    assert late.model_candidates == {t.value: {} for t in TARGETS}  # kept
    # The loop remembers how long the choice took (what it expects the next one to take).
    assert loop.last_choice_seconds("default") == first.duration_s
    assert loop.last_choice_seconds("other") is None
    assert loop.overrun("default", time.monotonic()) == 0.0  # no other pool to delay


def test_the_loop_rebases_the_live_factors_onto_a_new_bundle_at_once(
    tmp_path: Path, store: SampleStore, migrated_url: str
) -> None:
    """Prediction servers serve a new bundle once the live calibration file names it (the
    factors made for the bundle before are wrong on it): the loop ticks the pool's live
    calibration right after a retrain published, not at its next tick (a minute here)."""
    retrainer, loop = one_pool_loop(tmp_path, store, migrated_url, interval=0.01)
    model_dir = retrainer.settings.model_dir

    def named() -> str | None:
        calibration = read_live_calibration(model_dir)
        return calibration.bundle_version if calibration else None

    def retrained(n: int) -> bool:
        return loop.run_due() >= 0 and len(store.list_retrains()) == n

    versions = []
    for retrains, seed in ((1, 4), (2, 5)):
        add(store, 400, seed=seed)
        eventually(lambda: retrained(retrains), 10.0, "a retrain")  # noqa: B023
        bundle = retrainer.slot.published
        assert bundle is not None
        versions.append(bundle.version)
        assert named() == bundle.version
    assert versions[0] != versions[1]
