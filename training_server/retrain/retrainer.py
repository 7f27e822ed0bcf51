"""The retrains of one pool (Retrainer): at each tick, when the schedule says so and while
it leads, one retrain's steps in order: window -> fit both targets -> publish -> record.

The ticks of every pool run in one thread (retrain.loop), so fitting never blocks
the event loop (the libraries release the GIL while they train). One `except` around each
retrain: it logs the traceback, records a failed retrain and counts it, so a broken
retrain is never silent. One more around the tick keeps the thread alive when the store
fails a follower (that is not a retrain).

With several training replicas only the leader (training_server.leadership) retrains; the
others answer "follower" and serve the newest bundle the leader published. On a shared
model directory a follower loads it when a route asks for it (refresh), not at every
publication: the prediction servers read the directory themselves, and at 80 pools split
over two replicas each loaded about 4 bundles a second that no one asked it for, ~41 ms of
CPU each (benchmarks/README.md, bench_replicas). Without a shared directory the bundles
come through the store (training_server.bundle_share), imported as they are published.
On taking over a pool, a follower loads the newest first, so that it resumes from it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import numpy as np

from shared.artifact import Manifest, read_current_version
from shared.backends import library_versions
from shared.features import Columns
from shared.predictor import LoadedBundle
from shared.settings import LegacyArtifacts, TrainingSettings
from shared.slot import BundleSlot
from shared.targets import TARGETS, Target
from training_server.bundle_share import BundleShare
from training_server.leadership import AlwaysLeader, Leadership, replica_id
from training_server.metrics import TrainingMetrics
from training_server.retrain.fit import TargetFit
from training_server.retrain.history import RetrainRun, record_failed, record_ok
from training_server.retrain.publish import PublishedFollower, bundle_manifest, write_and_load
from training_server.retrain.schedule import RetrainSchedule, backoff_factor
from training_server.retrain.target import KeptChoice, kept_choices, train_target
from training_server.retrain.window import WindowBudget
from training_server.retrain_record import Outcome, RetrainRecord, to_columns
from training_server.store import SampleStore

log = logging.getLogger(__name__)

# Rows of a new level a retrain needs before it fits them alone (Retrainer.fit_since): with
# 200 the rougher models cost chatbot's x2 drift replay a 10 s window of coverage (0.75 ->
# 0.65); 400 did not (benchmarks/README.md).
FIT_SINCE_MIN_ROWS = 400


@dataclass
class RetrainState:
    """What the loop remembers between retrains (and /data/status, /healthz report)."""

    trained_through: int = 0  # highest sample id the published model has seen
    consecutive_failures: int = 0
    total_failures: int = 0
    last_error: str | None = None
    last_attempt_at: datetime | None = None
    last_success: RetrainRecord | None = None


class Retrainer:
    """One replica's retrains: the loop's thread (start/stop), one retrain (run_once, also
    POST /retrain), its state (/data/status), and the leadership among replicas."""

    def __init__(
        self,
        settings: TrainingSettings,
        store: SampleStore,
        metrics: TrainingMetrics,
        slot: BundleSlot,
        leadership: Leadership | None = None,
        share: BundleShare | None = None,
    ):
        self.settings = settings
        self.store = store
        self.metrics = metrics
        self.slot = slot  # what this replica serves: its own bundles, or the leader's
        self.leadership: Leadership = leadership or AlwaysLeader()
        self.share = share  # the store's copy of each bundle, for replicas without the dir
        self.trainer_id = replica_id()
        metrics.is_leader.set(1 if self.leadership.is_leader else 0)
        self.published = PublishedFollower(settings.model_dir)
        self.state = RetrainState()
        self.choices: dict[Target, KeptChoice] = {}  # each target's last choice
        # The first row of a target's new level after a large shift of its live factor
        # (LiveCalibrator.fit_since; 0: none): rows before it must not drag the model back.
        self.fit_since: Callable[[Target], int] = lambda _target: 0
        self._leading = self.leadership.is_leader  # as of its last election (pools share it)
        self._elected = False  # the loop's first tick only elects
        self.window = WindowBudget(settings.max_training_window, settings.retraining_interval_sec)
        # The loop's clock, plus early retrains while the data is small.
        self.schedule = RetrainSchedule(
            settings.retraining_interval_sec, early=settings.early_retrains
        )
        metrics.window_limit.set(self.window.limit)
        self._lock = threading.Lock()  # one retrain at a time (loop and manual triggers)
        self._serve_lock = threading.Lock()  # one load of the newest bundle at a time
        self._noted: str | None = None  # the newest version when last_success was read
        # Import the model libraries now (~1.2 s for xgboost) so the first retrain's
        # duration, and the window budget it sets, measure fitting alone.
        library_versions()

    def resume(self) -> None:
        """After a restart or on taking over, don't retrain a model that already saw every
        stored sample; do retrain if the bundle served is not the recorded one."""
        published = self.slot.published
        self.state.trained_through = 0
        history = self.store.list_retrains(limit=1, ok_only=True)
        if history:
            last = self.state.last_success = history[0]
            self.choices = kept_choices(last)
            if (
                published is not None
                and last.version == published.version
                and not self._lacks_legacy_files(published)
            ):
                self.state.trained_through = last.max_sample_id

    def _lacks_legacy_files(self, bundle: LoadedBundle) -> bool:
        """Legacy files are on but this bundle was written without them: retrain (from the
        stored rows) so the next bundle has them."""
        wanted = self.settings.legacy_artifacts is not LegacyArtifacts.NONE
        return wanted and bundle.manifest is not None and not bundle.manifest.legacy_files

    @property
    def is_leader(self) -> bool:
        return self.leadership.is_leader

    def _elect(self) -> bool:
        """Try for the leadership (cheap while held); on taking over, resume from the store."""
        was_leader, leader = self._leading, self.leadership.try_acquire()
        self._leading = leader
        self.metrics.is_leader.set(1 if leader else 0)
        if leader and not was_leader:
            self._serve_newest()  # serve, and resume from, what the previous leader published
            self.resume()
            log.info(
                "leading the retrains of pool %s as %s (trained through sample %d)",
                self.store.pool,
                self.trainer_id,
                self.state.trained_through,
            )
        return leader

    def _serve_newest(self) -> None:
        """Serve the pool's newest published bundle when it is not the one served: the
        store's copy when bundles are shared through it, else the model directory's."""
        with self._serve_lock:
            served = self.slot.published
            if self.share is not None:
                bundle = self.share.pull(served.version if served else None)
            else:
                bundle = self.published.newer(served)
            if bundle is not None:
                self.slot.publish(bundle)

    def _note_last_retrain(self) -> None:
        """A follower's view of the pool's last retrain (GET /pools, /data/status), read
        when another replica published a version since the last look."""
        newest = self.newest_version()
        if newest == self._noted:
            return
        try:
            history = self.store.list_retrains(limit=1, ok_only=True)
        except Exception:  # a store that does not answer: the next tick asks again
            log.debug("cannot read the last retrain of pool %s", self.store.pool, exc_info=True)
            return
        self.state.last_success = history[0] if history else self.state.last_success
        if history and history[0].version == newest:  # else its row is not written yet
            self._noted = newest

    def loads_when_asked(self) -> bool:
        """A follower on a shared model directory: it loads the newest bundle when a route
        asks (refresh). Not the leader, which serves its own, nor with bundles shared
        through the store (SharePuller imports them)."""
        return self.share is None and not self.serves_its_own()

    def refresh(self) -> None:
        """Serve the newest published bundle from now on, when loads_when_asked."""
        if self.loads_when_asked():
            self._serve_newest()

    def serves_its_own(self) -> bool:
        """Leading as of the last election and still: a lease taken since (the loop's next
        tick loads the newest bundle) or lost since serves what others publish."""
        return self._leading and self.is_leader

    def newest_version(self) -> str | None:
        """The newest version published for the pool, as far as this replica knows without
        loading it (a follower loads it on refresh): what listings report."""
        served = self.slot.published
        local = served.version if served else None
        if self.serves_its_own() or self.share is not None:
            return local
        try:
            newest = read_current_version(self.settings.model_dir)
        except OSError:
            newest = None
        return max(local or "", newest or "") or None

    def run_once(self, *, keep_choices: bool = False) -> Outcome:
        """One retrain if new samples arrived (FOLLOWER when another replica leads);
        `keep_choices`: refit each target's last choice instead of choosing again."""
        with self._lock:
            if not self._elect():
                self._note_last_retrain()  # loads no bundle (refresh does, when asked)
                return Outcome.FOLLOWER
            run = RetrainRun(
                datetime.now(UTC),
                time.perf_counter(),
                self.state.trained_through,
                self.window.limit,
                keep_choices,
            )
            try:
                run.watermark = self.store.max_sample_id()
                if run.watermark <= self.state.trained_through:
                    return Outcome.SKIPPED
                self.state.last_attempt_at = run.started
                outcome = self._retrain(run)
            except Exception as exc:
                self._record_failure(exc, run)
                return Outcome.FAILED
            if outcome is not Outcome.FOLLOWER:
                self.metrics.retrains.labels(outcome).inc()
            return outcome

    def _retrain(self, run: RetrainRun) -> Outcome:
        """The steps, in order; each one's name says its job."""
        self._apply_retention()
        run.fits = self._fit_targets(run)
        if all(f.model is None for f in run.fits.values()):
            return Outcome.SKIPPED  # not enough samples yet for either target: the prior serves
        if not self._still_leading():
            return Outcome.FOLLOWER
        manifest = bundle_manifest(self.settings, run.started, run.fits)
        previous_through = self._publish(manifest, run)
        record = record_ok(
            self.store, self.settings, self.trainer_id, manifest.version, run, previous_through
        )
        self._succeeded(record, run)
        return Outcome.OK

    def _apply_retention(self) -> None:
        s = self.settings
        self.store.enforce_retention(
            per_bucket=s.max_training_data_size_per_bucket, test_total=s.max_test_data_size
        )

    def _fit_targets(self, run: RetrainRun) -> dict[Target, TargetFit]:
        s = self.settings
        fits: dict[Target, TargetFit] = {}
        for target in TARGETS:
            run.windows[target] = self._training_window(target, run.window_limit)
            # The model is chosen per target among candidates (retrain.target, retrain.select).
            fits[target] = fit = train_target(
                s,
                target,
                run.windows[target],
                self.store.window(target, test=True, limit=s.max_test_data_size),
                self.choices.get(target) if run.keep_choices else None,
            )
            if fit.choice is not None:
                self.choices[target] = KeptChoice(fit.choice, fit.log_offset, fit.chosen_on)
        return fits

    def _training_window(self, target: Target, limit: int) -> tuple[Columns, np.ndarray]:
        """The newest `limit` training rows of `target`; only those since its new level
        once FIT_SINCE_MIN_ROWS of them have arrived (fewer fit a rougher model than all
        rows and the live factor together)."""
        since = self.fit_since(target)
        if since:
            window = self.store.window(target, test=False, limit=limit, since_id=since)
            if len(window[1]) >= FIT_SINCE_MIN_ROWS:
                # every retrain until the next large shift: the record's train_samples shows it
                log.debug("%s: fitting the %d rows since %d", target.value, len(window[1]), since)
                return window
        return self.store.window(target, test=False, limit=limit)

    def _still_leading(self) -> bool:
        """Lost the lock while fitting: leave publishing to the new leader (this narrows the
        overlap of two writers to the publish itself, which is atomic anyway)."""
        if self.leadership.try_acquire():
            return True
        self._leading = False
        self.metrics.is_leader.set(0)
        log.warning("leadership lost during the retrain; not publishing")
        return False

    def _publish(self, manifest: Manifest, run: RetrainRun) -> int:
        """Write the bundle, verify it as readers will read it, and serve it; returns the
        watermark the previous bundle was trained through.

        Published: CURRENT names this bundle now. Serve it and mark its rows as trained
        before the bookkeeping, which needs the store: when that fails (a locked or lost
        database) this replica's routes and /model/export must not lag behind CURRENT, and
        the next tick must not publish yet another version of the same rows."""
        bundle = write_and_load(self.settings, manifest, run.fits, run.windows)
        previous_through = self.state.trained_through
        self.slot.publish(bundle)
        if self.share is not None:
            self.share.push_bundle(manifest.version)
        self.state.trained_through = run.watermark
        self.metrics.model_published_at.set(run.started.timestamp())
        return previous_through

    def _succeeded(self, record: RetrainRecord, run: RetrainRun) -> None:
        """Size the next window by this retrain's time, reset the failure streak, tell."""
        next_limit = self.window.observe(
            record.duration_s, max(f.train_samples for f in run.fits.values())
        )
        if next_limit != run.window_limit:
            log.info(
                "training window %d -> %d rows per target (retrain took %.2f s, budget %.2f s)",
                run.window_limit,
                next_limit,
                record.duration_s,
                self.window.budget_sec,
            )
        self.metrics.window_limit.set(next_limit)
        self.state.consecutive_failures = 0
        self.state.last_error = None
        self.state.last_success = record
        self.metrics.consecutive_failures.set(0)
        self.metrics.retrain_seconds.observe(record.duration_s)
        self.metrics.observe_retrain(record)
        log.info(
            "retrain ok pool=%s version=%s duration_s=%.3f %s",
            self.store.pool,
            record.version,
            record.duration_s,
            " ".join(  # the per-target scores, named as the retrains table's columns
                f"{k}={v:.4g}"
                for k, v in to_columns(record).items()
                if k.startswith(("ttft_", "tpot_")) and isinstance(v, int | float)
            ),
        )

    def _record_failure(self, exc: Exception, run: RetrainRun) -> None:
        log.exception("retrain failed")
        self.state.consecutive_failures += 1
        self.state.total_failures += 1
        self.state.last_error = f"{type(exc).__name__}: {exc}"
        self.metrics.retrains.labels(Outcome.FAILED).inc()
        self.metrics.consecutive_failures.set(self.state.consecutive_failures)
        try:
            record_failed(
                self.store, self.settings, self.trainer_id, exc, self.state.last_error, run
            )
        except Exception:  # the store may be what failed; the counters above still tell
            log.exception("could not record the failed retrain")

    # the loop's step (retrain.loop runs it) ------------------------------------------
    def tick(self, *, behind: bool = False) -> float:
        """One tick: elect on the first, retrain when due on the others (keeping each
        target's last choice when the loop runs `behind` its interval); returns the
        seconds to the next tick."""
        try:
            if not self._elected:
                with self._lock:
                    self._elect()
                self._elected = True
            elif self._due():
                self.run_once(keep_choices=behind)
                self._recount()
        except Exception:  # see the module docstring: retrain errors never get here
            log.exception("retrainer tick failed; trying again next interval")
        return self.next_wait()

    def _recount(self) -> None:
        """Count the pool's stored rows once an interval (leader or not: other replicas
        ingest too, and retention deletes), so /metrics and GET /pools answer from counts
        kept in memory instead of a query per pool at every scrape."""
        try:
            self.store.counts()
        except Exception:  # a store that does not answer: run_once records and counts that
            log.debug("cannot count the stored rows of pool %s", self.store.pool, exc_info=True)

    def _due(self) -> bool:
        """Whether this tick retrains (retrain.schedule): on the clock, or during the
        warm-up once the stored rows doubled. A store that does not answer leaves the
        clock alone to decide (run_once then records the failure)."""
        rows = 0
        if self.schedule.warming_up:
            try:
                rows = self.store.max_sample_id()
            except Exception:
                log.debug("cannot count the stored rows; the clock decides", exc_info=True)
        if not self.schedule.due(rows):
            return False
        self.schedule.started(rows)
        return True

    def next_wait(self) -> float:
        """The schedule's next tick; after failed retrains in a row the interval, stretched
        by the schedule's backoff_factor (the first success resets it)."""
        failures = self.state.consecutive_failures
        factor = backoff_factor(failures)
        if factor > 1:
            log.warning(
                "%d failed retrains in a row: next try in %.0f s",
                failures,
                factor * self.settings.retraining_interval_sec,
            )
            return float(factor * self.settings.retraining_interval_sec)
        return self.schedule.wait()
