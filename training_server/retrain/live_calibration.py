"""Live calibration (LiveCalibrator): the live factor on the served predictions, run by the
leading trainer, published in shared.live_calibration's file for every server.

It corrects, between bundles, what the bundle's own factor (retrain.cross_conformal) left:
every prediction server multiplies its answers by both. Once a second the leader reads the
rows that arrived since its last step, asks the bundle served what it answers for them now
(times the factor), and moves one log-factor per target against the misses
(retrain.live_factor: adaptive conformal steps, a shift followed within tens of rows, and a
rebase when a new bundle is served, so the factor never counts a move the bundle already
made); in a pool whose rows fall into groups (P/D roles, hardware classes), one factor per
group as well (retrain.live_groups). The rows are newer than the bundle's training rows, so
these are out-of-sample answers; scoring the p90 each row was served instead
(`predicted_*_ms`) would score rows predicted by the previous bundle, or the prior, against
this one's factor for as long as its requests take. The served p90s move a slow gap on
top (retrain.served_gap: what the factor misses as rows arrive long after their p90 was
served) and give `recent_coverage`. Both are published in <model_dir>/calibration.json
(shared.live_calibration) for every prediction server; followers only read that file.

Only targets the serving bundle has a trained model for are corrected: the cold-start prior
is a documented formula, and its misses say nothing about the next model.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime

import numpy as np

from shared.live_calibration import (
    NO_LIVE_OFFSETS,
    LiveCalibration,
    LiveCalibrationReader,
    LiveOffsets,
    TargetLiveCalibration,
    remove_live_calibration,
    write_live_calibration,
)
from shared.predictor import LoadedBundle
from shared.settings import Calibration, TrainingSettings
from shared.slot import BundleSlot
from shared.targets import TARGETS, Target
from training_server.bundle_share import BundleShare
from training_server.metrics import TrainingMetrics
from training_server.retrain.late_rows import late_rows, observe_late
from training_server.retrain.level_blend import (
    BLEND_TARGETS,
    LevelBlend,
    published_fields,
    resumed_blend,
)
from training_server.retrain.live_factor import BURST_WINDOW_TARGETS, LiveFactor, clamp
from training_server.retrain.live_groups import EppRows, GroupFactors, GroupRows, group_names
from training_server.retrain.rebase_rows import REBASE_MIN_ROWS, rebase_asks
from training_server.retrain.served_gap import ServedGap, served_by_prior
from training_server.store import SampleStore, ServedRows

log = logging.getLogger(__name__)

# Rows read per step: a backlog after a pause is worked off over several steps.
MAX_ROWS_PER_STEP = 50_000
# recent_coverage is the share of hits over this many newest scored rows per target.
RECENT_ROWS = 1_000
# Targets whose retrains forget the rows before a large shift of their factor. Not TTFT:
# its load bursts move its factor by more than LARGE_SHIFT_LOG without any drift, and
# forgetting at each cost sharegpt's TTFT (benchmarks/README.md).
FIT_SINCE_TARGETS = frozenset({Target.TPOT})


class LiveCalibrator:
    """Leader: moves and publishes the live factor once a tick. Follower: reads it."""

    def __init__(
        self,
        settings: TrainingSettings,
        store: SampleStore,
        metrics: TrainingMetrics,
        slot: BundleSlot,
        is_leader: Callable[[], bool],
        trained_through: Callable[[], int] = lambda: 0,
        share: BundleShare | None = None,
    ):
        self.settings = settings
        # The newest row the served bundle was trained on: rows up to it are in its sample.
        self.trained_through = trained_through
        self.store = store
        self.metrics = metrics
        # The bundle served (its models decide what to correct); new factors go to it too.
        self.slot = slot
        self.is_leader = is_leader
        # Replicas without a shared model directory: the leader shares its file through
        # the store, the others import the pool's newest bundle and file from it.
        self.share = share
        self.enabled = settings.calibration is Calibration.ADAPTIVE
        self.reader = LiveCalibrationReader(settings.model_dir)
        self.state: LiveCalibration | None = None  # the leader's own, once it has led
        self._recent = {t: deque[bool](maxlen=RECENT_ROWS) for t in TARGETS}
        self._factors: dict[Target, LiveFactor] = {}
        self._gaps: dict[Target, ServedGap] = {}
        self._blends: dict[Target, LevelBlend] = {}  # the pool's, of BLEND_TARGETS
        self._groups = GroupFactors(settings.quantile_alpha, settings.calibration_step)
        self._corrected: LoadedBundle | None = None  # the bundle the factors correct
        self._corrected_through = 0  # the newest row id it was trained on
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def offsets(self) -> LiveOffsets:
        """The live log-factors this replica serves now."""
        if self.state is not None:
            return self.state.log_offsets(self.settings.quantile_alpha)
        return self.reader.log_offsets(self.settings.quantile_alpha)

    def published(self) -> LiveCalibration | None:
        """The live calibration this replica serves: the leader's own, else the file it
        follows as last read (None before any)."""
        return self.state if self.state is not None else self.reader.current

    def level_since(self, target: Target) -> int:
        """The id of the first row of the level `target`'s factor follows (0: no shift
        seen by this leader)."""
        factor = self._factors.get(target)
        return factor.level_since if factor is not None else 0

    def fit_since(self, target: Target) -> int:
        """The first row id of `target`'s new level after a large shift of its factor, for
        the retrains to fit the rows since (0: all rows; also on a follower): as published."""
        entry = self.state.targets.get(target) if self.state is not None else None
        return entry.fit_since if entry is not None else 0

    def tick(self) -> None:
        """Leader: score the new rows and publish. Follower: follow the leader's file."""
        with self._lock:
            if not self.enabled:
                return
            if self.is_leader():
                if self.state is None:
                    self._resume()
                self.step()
                if self.share is not None:  # when the file changed
                    self.share.push_calibration()
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
                bundle_version=self.slot.published.version if self.slot.published else None,
            )
            write_live_calibration(self.settings.model_dir, published)
        self.state = published
        q, step = self.settings.quantile_alpha, self.settings.calibration_step
        self._factors = {
            t: LiveFactor(
                q, step, e.factor_log_offset, e.fit_since, burst_window=t in BURST_WINDOW_TARGETS
            )
            for t, e in published.targets.items()
        }
        self._gaps = {
            t: ServedGap(q, step, e.served_level, e.served_gap)
            for t, e in published.targets.items()
        }
        self._blends = {
            t: resumed_blend(q, e) for t, e in published.targets.items() if t in BLEND_TARGETS
        }
        self._groups = GroupFactors(
            self.settings.quantile_alpha, self.settings.calibration_step, published.groups
        )
        self._corrected = self.slot.published  # the file's factors were for what is served
        self._corrected_through = self.trained_through()
        log.info(
            "live calibration from sample %d: %s",
            published.through_sample_id,
            {t.value: round(e.log_offset, 4) for t, e in published.targets.items()},
        )
        self._changed()

    def step(self) -> bool:
        """One update from the rows since the last one and the bundle now served, published
        (with the new watermark) whenever either changed; True when rows were scored."""
        assert self.state is not None
        rows = self.store.served_since(
            self.state.through_sample_id, limit=MAX_ROWS_PER_STEP, features=True
        )
        bundle = self.slot.published
        self._score_late(rows, bundle)
        rebased = self._rebase(bundle)
        version = bundle.version if bundle else None
        if not len(rows.ids) and not rebased and version == self.state.bundle_version:
            return False
        targets = dict(self.state.targets)
        scored = False
        # What the bundle answers for these rows now, without the live factor: the factor is
        # scored on the model it corrects, whichever model or factor served each row (rows
        # keep arriving for seconds after a new bundle, predicted by the one before it).
        answers = (
            bundle.with_live(NO_LIVE_OFFSETS).predict(rows.columns)
            if bundle and len(rows.ids)
            else {}
        )
        # A retrain reads rows up to the moment it starts: those that arrived since the last
        # step may be in the new bundle's training rows, and a fit answers them too well.
        fresh = rows.ids > self.trained_through()
        names = group_names(
            rows.columns.get("pod_type"), rows.columns.get("pod_class"), len(rows.ids)
        )
        for target in TARGETS:
            entry, factor, gap = targets[target], self._factors[target], self._gaps[target]
            measured = (rows.actual[target] > 0) & fresh
            if not measured.any() or bundle is None or not bundle.has_model(target):
                now = clamp(factor.log_offset + gap.log_offset)
                weight, level = published_fields(self._blends.get(target))  # late rows move it
                update = {"log_offset": now, "blend_weight": weight, "blend_level_ms": level}
                targets[target] = entry.model_copy(update=update)
                continue
            actual = rows.actual[target][measured]
            served = answers[target][measured] * math.exp(factor.log_offset)
            epp_actual, epp_served = rows.scored(target)  # what the EPP was served
            self._recent[target].extend((epp_actual <= epp_served).tolist())
            pool_log_offset = factor.log_offset  # what a group seen first starts from
            if factor.observe(actual, served, rows.ids[measured]):
                self._shifted(target, "", factor)
            if (blend := self._blends.get(target)) is not None:
                as_served = served * math.exp(gap.log_offset)  # but for the blend
                blend.observe(actual, as_served, rows.ids[measured], factor.large_since)
            epp_measured = (rows.actual[target] > 0) & ~np.isnan(rows.predicted[target])
            by_prior = served_by_prior(target, rows.columns, rows.predicted[target])
            epp = EppRows(names[epp_measured], epp_actual, epp_served, ~by_prior[epp_measured])
            gap.observe(epp.actual[epp.by_model], epp.served[epp.by_model])
            shifted = self._groups.observe(
                target,
                GroupRows(names[measured], actual, answers[target][measured], rows.ids[measured]),
                pool_log_offset,
                epp,
            )
            for name in shifted:
                self._shifted(target, name, self._groups.factors[name][target])
            recent = self._recent[target]
            blend_weight, blend_level_ms = published_fields(blend)
            targets[target] = TargetLiveCalibration(
                log_offset=clamp(factor.log_offset + gap.log_offset),
                served_gap=gap.log_offset,
                served_level=gap.level,
                fit_since=factor.large_since if target in FIT_SINCE_TARGETS else 0,
                rows=entry.rows + len(actual),
                recent_coverage=float(np.mean(recent)) if recent else None,
                blend_weight=blend_weight,
                blend_level_ms=blend_level_ms,
            )
            self.metrics.live_rows.labels(target.value).inc(len(actual))
            scored = True
        newest = int(rows.ids[-1]) if len(rows.ids) else self.state.through_sample_id
        self.state = self.state.model_copy(
            update={
                "updated_at": datetime.now(UTC),
                "through_sample_id": newest,
                "targets": targets,
                "groups": self._groups.published(),
                "bundle_version": version,
            }
        )
        write_live_calibration(self.settings.model_dir, self.state)
        if scored or rebased:
            self._changed()
        return scored

    def pull_shared(self) -> None:
        """Follower without the leader's directory: serve the pool's newest bundle and
        live calibration file from the store (imported into this replica's directory);
        nothing on the leader, or without sharing (bundle_share.SharePuller calls it)."""
        if self.share is None or self.is_leader():
            return
        served = self.slot.published
        bundle = self.share.pull(served.version if served else None)
        if bundle is not None:
            self.slot.publish(bundle)
            log.info("serving bundle %s shared through the store", bundle.version)

    def _shifted(self, target: Target, group: str, factor: LiveFactor) -> None:
        log.info(
            "live calibration: %s%s shifted; factor now %.3f",
            target.value,
            f" on {group}" if group else "",
            math.exp(factor.log_offset),
        )
        self.metrics.live_shifts.labels(target.value).inc()

    def _score_late(self, rows: ServedRows, bundle: LoadedBundle | None) -> None:
        """Rows the previous bundle served and the new one was trained on: scored against
        the previous one before the rebase (retrain.late_rows)."""
        old = self._corrected
        if old is None or bundle is None or old.version == bundle.version or not len(rows.ids):
            return
        late = late_rows(rows, self._corrected_through, self.trained_through())
        blends = {t: (b, self._gaps[t].log_offset) for t, b in self._blends.items()}
        for shifted in observe_late(rows, late, old, self._factors, self._groups, blends):
            self._shifted(shifted.target, shifted.group, shifted.factor)

    def _rebase(self, bundle: LoadedBundle | None) -> bool:
        """When a new bundle is served, move each trained target's factor (the pool's and
        each group's) by how much less (or more) the new bundle needs to cover the same
        held-out rows (retrain.live_factor, retrain.rebase_rows); True when one moved."""
        old, self._corrected = self._corrected, bundle
        old_through, self._corrected_through = self._corrected_through, self.trained_through()
        if bundle is None or old is None or old.version == bundle.version:
            return False
        moved = False
        for target in TARGETS:
            if not (old.has_model(target) and bundle.has_model(target)):
                continue
            pair = (old, bundle, old_through)
            moved = self._rebase_one(target, self._factors[target], pair) or moved
            for name, factors in self._groups.factors.items():
                if target in factors and self._rebase_one(target, factors[target], pair, name):
                    self._groups.rebased(name, target)
                    moved = True
        return moved

    def _rebase_one(
        self,
        target: Target,
        factor: LiveFactor,
        pair: tuple[LoadedBundle, LoadedBundle, int],
        group: str | None = None,
    ) -> bool:
        """Rebase one factor from the old bundle to the new one (`pair`: both, and the newest
        row the old one was trained on), on held-out rows (of its group, if any) that
        retrain.rebase_rows chooses: no bundle was fitted on them."""
        old, new, old_through = pair
        for ask in rebase_asks(target, factor.level_since, old_through):
            columns, actual = self.store.window(
                target,
                test=True,
                limit=ask.limit,
                since_id=ask.since_id,
                through_id=ask.through_id,
                group=group,
            )
            if len(actual) >= REBASE_MIN_ROWS:
                break
        if not len(actual):
            return False
        # Both without their live factor: the factor is what is being rebased.
        before = old.with_live(NO_LIVE_OFFSETS).predict(columns)[target]
        after = new.with_live(NO_LIVE_OFFSETS).predict(columns)[target]
        move = factor.rebase(before, after, actual)
        log.info(
            "live calibration: %s%s rebased by %.3f on %s",
            target.value,
            f" on {group}" if group else "",
            move,
            new.version,
        )
        return move != 0.0

    def _changed(self) -> None:
        current = self.state or self.reader.current
        for target, entry in current.targets.items() if current else ():
            self.metrics.live_log_offset.labels(target.value).set(entry.log_offset)
            self.metrics.live_blend_weight.labels(target.value).set(entry.blend_weight)
            if entry.recent_coverage is not None:
                self.metrics.live_coverage.labels(target.value).set(entry.recent_coverage)
        for name, entries in current.groups.items() if current else ():
            for target, entry in entries.items():
                self.metrics.live_group_log_offset.labels(target.value, name).set(entry.log_offset)
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
