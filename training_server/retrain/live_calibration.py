"""Live calibration (LiveCalibrator): adaptive conformal inference on the served predictions,
run by the leading trainer, published in shared.live_calibration's file for every server.

It corrects, between bundles, what the bundle's own factor (retrain.cross_conformal) left:
every prediction server multiplies its answers by both. Every training row may carry the p90
the EPP acted on (`predicted_*_ms`). Once a second the leader reads the rows that arrived
since its last step and moves one log-factor per target: up by step * q for every actual
above its served p90, down by step * (1 - q) for every one at or below it. The factor stops
moving exactly when misses run at 1 - q, and keeps the long-run share of misses there
whatever the load does (Gibbs & Candes, 2021). The factor is published in
<model_dir>/calibration.json (shared.live_calibration) for every prediction server.
Followers only read that file.

Only targets the serving bundle has a trained model for are corrected: the cold-start prior
is a documented formula, and its misses say nothing about the next model.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np

from shared.live_calibration import (
    MAX_LIVE_LOG_OFFSET,
    LiveCalibration,
    LiveCalibrationReader,
    TargetLiveCalibration,
    remove_live_calibration,
    write_live_calibration,
)
from shared.settings import Calibration, TrainingSettings
from shared.slot import BundleSlot
from shared.targets import TARGETS, Target
from training_server.metrics import TrainingMetrics
from training_server.store import SampleStore

log = logging.getLogger(__name__)

# Rows read per step: a backlog after a pause is worked off over several steps.
MAX_ROWS_PER_STEP = 50_000
# recent_coverage is the share of hits over this many newest scored rows per target.
RECENT_ROWS = 1_000


def aci_step(
    log_offset: float, actual: np.ndarray, served: np.ndarray, quantile: float, step: float
) -> float:
    """The log-factor after scoring `served` against `actual` (one ACI update per row;
    their order does not matter, only the count of misses)."""
    misses = int(np.count_nonzero(actual > served))
    moved = log_offset + step * (misses - (1.0 - quantile) * len(actual))
    return float(min(MAX_LIVE_LOG_OFFSET, max(-MAX_LIVE_LOG_OFFSET, moved)))


class LiveCalibrator:
    """Leader: moves and publishes the live factor once a tick. Follower: reads it."""

    def __init__(
        self,
        settings: TrainingSettings,
        store: SampleStore,
        metrics: TrainingMetrics,
        slot: BundleSlot,
        is_leader: Callable[[], bool],
    ):
        self.settings = settings
        self.store = store
        self.metrics = metrics
        # The bundle served (its models decide what to correct); new factors go to it too.
        self.slot = slot
        self.is_leader = is_leader
        self.enabled = settings.calibration is Calibration.ADAPTIVE
        self.reader = LiveCalibrationReader(settings.model_dir)
        self.state: LiveCalibration | None = None  # the leader's own, once it has led
        self._recent = {t: deque[bool](maxlen=RECENT_ROWS) for t in TARGETS}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def offsets(self) -> dict[Target, float]:
        """The live log-factors this replica serves now."""
        if self.state is not None:
            return self.state.log_offsets(self.settings.quantile_alpha)
        return self.reader.log_offsets(self.settings.quantile_alpha)

    def tick(self) -> None:
        """Leader: score the new rows and publish. Follower: follow the leader's file."""
        with self._lock:
            if not self.enabled:
                return
            if self.is_leader():
                if self.state is None:
                    self._resume()
                self.step()
            else:
                self.state = None  # on taking over, resume from what the leader published
                if self.reader.poll():
                    self._changed()

    def _resume(self) -> None:
        """Continue from the published file when it fits these settings, else start at
        the newest stored row with no correction (history was served by other models)."""
        published = None
        try:
            self.reader.poll()
            published = self.reader.current
        except (OSError, ValueError):
            log.warning("live calibration file unreadable; starting afresh", exc_info=True)
        if published is None or published.quantile != self.settings.quantile_alpha:
            published = LiveCalibration(
                updated_at=datetime.now(UTC),
                quantile=self.settings.quantile_alpha,
                through_sample_id=self.store.max_sample_id(),
                targets={t: TargetLiveCalibration() for t in TARGETS},
            )
            write_live_calibration(self.settings.model_dir, published)
        self.state = published
        log.info(
            "live calibration from sample %d: %s",
            published.through_sample_id,
            {t.value: round(e.log_offset, 4) for t, e in published.targets.items()},
        )
        self._changed()

    def step(self) -> bool:
        """One update from the rows since the last one, published (with the new watermark)
        whenever rows arrived; True when some were scored."""
        assert self.state is not None
        rows = self.store.served_since(self.state.through_sample_id, limit=MAX_ROWS_PER_STEP)
        if not len(rows.ids):
            return False
        bundle = self.slot.published
        targets = dict(self.state.targets)
        scored = False
        for target in TARGETS:
            actual, served = rows.scored(target)
            if not len(actual) or bundle is None or not bundle.has_model(target):
                continue
            entry = targets[target]
            self._recent[target].extend((actual <= served).tolist())
            targets[target] = TargetLiveCalibration(
                log_offset=aci_step(
                    entry.log_offset,
                    actual,
                    served,
                    self.settings.quantile_alpha,
                    self.settings.calibration_step,
                ),
                rows=entry.rows + len(actual),
                recent_coverage=float(np.mean(self._recent[target])),
            )
            self.metrics.live_rows.labels(target.value).inc(len(actual))
            scored = True
        self.state = self.state.model_copy(
            update={
                "updated_at": datetime.now(UTC),
                "through_sample_id": int(rows.ids[-1]),
                "targets": targets,
            }
        )
        write_live_calibration(self.settings.model_dir, self.state)
        if scored:
            self._changed()
        return scored

    def _changed(self) -> None:
        current = self.state or self.reader.current
        for target, entry in current.targets.items() if current else ():
            self.metrics.live_log_offset.labels(target.value).set(entry.log_offset)
            if entry.recent_coverage is not None:
                self.metrics.live_coverage.labels(target.value).set(entry.recent_coverage)
        self.slot.set_live(self.offsets())

    # loop -------------------------------------------------------------------------------
    def start(self) -> None:
        if not self.enabled:
            # A file left by an adaptive run must not keep correcting the servers.
            remove_live_calibration(self.settings.model_dir)
            return
        self._thread = threading.Thread(target=self._loop, name="live-calibrator", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.settings.calibration_interval_sec):
            try:
                self.tick()
            except Exception:  # a store hiccup: the factor just waits for the next tick
                log.exception("live calibration step failed; trying again next interval")
