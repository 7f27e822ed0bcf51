"""ModelWatcher: polls the model directory and swaps in each newly published bundle, and
the live calibration factors (shared.live_calibration) whenever they change.

Loading and verification run in the watcher's own thread at the lowest CPU priority, off
the request path: on a worker's one CPU a bundle load (~26 ms of CPU) would otherwise take
half of it from requests while it runs. A bundle that fails verification is refused once,
counted, and the previous bundle keeps serving. With
LATENCY_SYNC_FROM_TRAINER it first mirrors the trainer's published bundle and calibration
over HTTP into the local model directory (for pods with no shared volume; one worker at a
time, prediction_server.mirror). With
TRAINING_SERVER_URL it reports the version it serves after each poll (fleet_report).
A refused bundle that needs a newer server (a rolling upgrade whose trainer went first,
shared.artifact.NeedsNewerServer) is also kept as `needs_newer` for GET /status.

A pool mirrored from a trainer that lists every pool's version and live calibration
(GET /pools?calibration=true, read once per interval by prediction_server.pools) is fed by
that listing (`follow_listing`): its watcher writes the listed calibration and asks the
pool's own routes only when the listed version is new, or once every FULL_SYNC_INTERVALS
as a safety net, and reports its version when it changes or once per that period. Without
it, 80 pools cost three requests each per interval (info, calibration, report) on every
worker of every prediction server.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

import httpx

from prediction_server.fleet_report import FleetReporter
from prediction_server.metrics import PredictionMetrics
from prediction_server.mirror import goes_back, import_mirrored
from shared.artifact import (
    FORMAT_VERSION,
    BundleError,
    NeedsNewerServer,
    read_current_version,
    replace_file,
)
from shared.live_calibration import LIVE_CALIBRATION, LiveCalibration, LiveCalibrationReader
from shared.predictor import LoadedBundle, load_bundle
from shared.settings import ModelType, PredictionSettings
from shared.slot import BundleSlot
from shared.tokens import TokenAuth

log = logging.getLogger(__name__)
T = TypeVar("T")
LOWEST_PRIORITY = 19  # nice value: the kernel runs this thread only when requests leave CPU
LIBRARIES = {ModelType.XGBOOST: "xgboost", ModelType.LIGHTGBM: "lightgbm"}
# A watcher fed by the trainer's listing still asks its pool's routes (and reports) this
# often, in sync intervals: a listing that came from a replica behind the others must not
# leave a pool unsynced, nor the trainer's fleet view without a report.
FULL_SYNC_INTERVALS = 10
# A new bundle waits for the live factors rebased onto it (ModelWatcher._paired): the
# trainer's retrain loop rebases right after it publishes, so this server looks again every
# PAIR_POLL_SEC, and serves the bundle anyway after PAIR_WAIT_SEC (a trainer whose live
# calibration stopped must not hold bundles back).
PAIR_POLL_SEC = 0.1
PAIR_WAIT_SEC = 3.0


def lower_priority() -> None:
    # Linux applies nice per thread (by its id); elsewhere, or where refused, run as is.
    with contextlib.suppress(AttributeError, OSError):
        os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), LOWEST_PRIORITY)


@dataclass(frozen=True)
class NewerServerNeeded:
    """The newest bundle refused because it needs a newer server (GET /status says so):
    its version, its format, and the newest format this server reads."""

    version: str
    bundle_format: int
    reads_up_to: int = FORMAT_VERSION


class ModelWatcher:
    def __init__(
        self,
        settings: PredictionSettings,
        slot: BundleSlot,
        metrics: PredictionMetrics,
        *,
        loads: ThreadPoolExecutor | None = None,
    ):
        """`loads`: a loader thread shared with other pools' watchers (else its own)."""
        self.settings = settings
        self.slot = slot
        self.metrics = metrics
        self.refused: dict[str, str] = {}  # version -> reason; not retried
        self.needs_newer: NewerServerNeeded | None = None  # until a later bundle is served
        self.live = LiveCalibrationReader(settings.model_dir)
        self._lock = asyncio.Lock()
        self._owns_loads = loads is None
        self._background = loads or ThreadPoolExecutor(
            1, "model-watcher", initializer=lower_priority
        )
        # Set by open() when bundles are mirrored from the trainer (no shared volume).
        self.sync_client: httpx.AsyncClient | None = None
        # The bundle this watcher's last mirror imported, served without a second load.
        self._imported: LoadedBundle | None = None
        # The trainer's listing feeds this watcher (follow_listing): sync only when asked.
        self.listed = False
        self._listing: tuple[str | None, bytes | None] | None = None  # news not taken yet
        self._listed_calibration: bytes | None = None  # the last one taken
        self._wake = asyncio.Event()
        # A new bundle loaded before the live factors rebased onto it: (bundle, since).
        self._pending: tuple[LoadedBundle, float] | None = None

    def open(self) -> None:
        """Start the HTTP client for LATENCY_SYNC_FROM_TRAINER (call on the event loop)."""
        s = self.settings
        # The first bundle's load would also import its library (~0.7 s of CPU, at the
        # lowest priority): import it now, in the loads' thread, ahead of any bundle.
        self._background.submit(importlib.import_module, LIBRARIES[s.model_type])
        if s.sync_from_trainer and s.training_server_url:
            self.sync_client = httpx.AsyncClient(
                base_url=s.training_server_url, timeout=10.0, auth=TokenAuth(s)
            )

    async def close(self) -> None:
        if self._owns_loads:
            self._background.shutdown(wait=False, cancel_futures=True)
        if self.sync_client is not None:
            await self.sync_client.aclose()

    async def reload(self, *, sync: bool = True) -> tuple[bool, bool]:
        """Mirror from the trainer (when configured and `sync`), then load: (synced, loaded)."""
        synced = False
        if self.sync_client is not None and sync:
            synced = await self.sync_from_trainer(self.sync_client)
        return synced, await self.check()

    def follow_listing(self, version: str | None, calibration: bytes | None) -> None:
        """The trainer listed this pool's newest `version` and live calibration document
        (None: it has none). When either is news here, keep them for the loop and wake
        it: it writes the calibration and syncs a new version (never waited for here, so
        one pool's slow sync holds up neither the listing nor the other pools)."""
        self.listed = True
        if calibration != self._listed_calibration or self._is_new(version):
            self._listing = (version, calibration)
            self._wake.set()

    def _is_new(self, version: str | None) -> bool:
        serving = self.slot.serving
        local = None if serving.is_prior else serving.version  # the prior sorts after all
        new = bool(version) and version != local and version not in self.refused
        return new and not goes_back(version, local)

    async def _take_listing(self) -> bool:
        """Write the listed calibration the loop was woken for; True when the listed
        version is new here (then the loop syncs)."""
        listing, self._listing = self._listing, None
        if listing is None:
            return False
        version, calibration = listing
        async with self._lock:
            await self._write_live(calibration)
        self._listed_calibration = calibration
        return self._is_new(version)

    async def _off_path(self, fn: Callable[..., T], *args: object) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._background, fn, *args)

    async def check(self) -> bool:
        """Load the published version if it is new, apply the live calibration; True when
        a new version was swapped in."""
        async with self._lock:
            await self._poll_live()
            bundle = self._paired(await self._load_new_version()) or self.slot.serving
            previous = self.slot.publish(bundle, live=self.live.log_offsets(bundle.quantile))
            bundle = self.slot.serving
            if bundle is previous:
                return False
            self.metrics.served_scales(bundle)
            if bundle.version == previous.version:
                return False
            self.metrics.reloads.inc()
            self.metrics.served(bundle.version, previous.version)
            if self.needs_newer is not None:  # published after the refused one: all is well
                self.needs_newer = None
                self.metrics.format_needed.set(0)
            log.info("serving bundle %s (was %s)", bundle.version, previous.version)
            return True

    def _paired(self, loaded: LoadedBundle | None) -> LoadedBundle | None:
        """`loaded` (a new bundle) if it can be served now, else None and it waits: while
        the live calibration file still names the bundle served, its factors correct that
        one, and the new bundle is served once the leader has rebased them onto it (right
        after it published, so usually by this server's next look; PAIR_WAIT_SEC at most,
        for a trainer whose calibration stopped)."""
        pending, self._pending = self._pending, None
        if loaded is None:
            return None
        live = self.live.current
        stale = (
            live is not None
            and live.bundle_version is not None
            and live.bundle_version == self.slot.serving.version
            and live.bundle_version != loaded.version
        )
        now = time.monotonic()
        since = pending[1] if pending is not None and pending[0] is loaded else now
        if stale and now - since < PAIR_WAIT_SEC:
            self._pending = (loaded, since)
            return None
        return loaded

    async def _load_new_version(self) -> LoadedBundle | None:
        version = await self._off_path(read_current_version, self.settings.model_dir)
        if version is None or version == self.slot.serving.version or version in self.refused:
            return None
        if self._pending is not None and self._pending[0].version == version:
            return self._pending[0]  # loaded already, waiting for its live factors
        imported, self._imported = self._imported, None
        if imported is not None and imported.version == version:
            return imported  # mirrored just now: loaded by its import's verification
        try:
            return await self._off_path(load_bundle, self.settings.model_dir, version)
        except BundleError as exc:
            self._refuse(version, exc)
            log.error(
                "refused bundle %s: %s; still serving %s", version, exc, self.slot.serving.version
            )
            return None

    def _refuse(self, version: str, exc: BundleError) -> None:
        """Remember the refusal (not retried), count it, and tell when a newer server would
        read the bundle."""
        self.refused[version] = str(exc)
        self.metrics.refused.inc()
        if isinstance(exc, NeedsNewerServer):
            self.needs_newer = NewerServerNeeded(version, exc.bundle_format)
            self.metrics.format_needed.set(exc.bundle_format)

    async def _poll_live(self) -> None:
        try:
            await self._off_path(self.live.poll)
        except (OSError, ValueError) as exc:  # keep serving the last good factors
            self.metrics.live_errors.inc()
            log.warning("live calibration not read: %s", exc)

    async def sync_from_trainer(self, client: httpx.AsyncClient) -> bool:
        """Mirror the trainer's published bundle locally; True when a new one arrived.
        A bundle that fails verification is refused once, not downloaded at every poll."""
        async with self._lock:
            remote = None
            try:
                info = (await client.get("/model/download/info")).raise_for_status().json()
                remote = info.get("model_version")
                await self._mirror_live(client)
                local = await self._off_path(read_current_version, self.settings.model_dir)
                if not remote or remote == local or remote in self.refused:
                    return False
                if goes_back(remote, local):  # a replica that has not caught up yet
                    return False
                archive = (await client.get("/model/export")).raise_for_status().content
                imported = await self._off_path(
                    import_mirrored, self.settings.model_dir, archive, remote, str(client.base_url)
                )
                self._imported = imported or self._imported
                return imported is not None
            except BundleError as exc:
                self._refuse(str(remote), exc)
                log.error("refused bundle %s from the trainer: %s", remote, exc)
                return False
            except (httpx.HTTPError, ValueError) as exc:
                self.metrics.sync_errors.inc()
                log.warning("model sync from %s failed: %s", self.settings.training_server_url, exc)
                return False

    async def _mirror_live(self, client: httpx.AsyncClient) -> None:
        """Copy the trainer's live calibration file when it differs from ours."""
        reply = await client.get("/calibration")
        data = None if reply.status_code == 404 else reply.raise_for_status().content
        await self._write_live(data)

    async def _write_live(self, data: bytes | None) -> bool:
        """Make the local live calibration file `data` (None: remove it) unless it is
        older than ours; True when the file changed."""
        path = self.settings.model_dir / LIVE_CALIBRATION
        local = await self._off_path(lambda: path.read_bytes() if path.is_file() else None)
        if data is None:
            if local is not None:
                await self._off_path(lambda: path.unlink(missing_ok=True))
            return local is not None
        if data != local and not _older_calibration(data, local):
            await self._off_path(replace_file, path, data)
            return True
        return False

    async def run(self) -> None:
        """Poll forever (until cancelled), mirroring from the trainer first when configured.
        With TRAINING_SERVER_URL set, each poll ends by reporting the version served; a
        watcher fed by the listing syncs and reports when something changed, or once per
        FULL_SYNC_INTERVALS."""
        interval = self.settings.model_sync_interval_sec
        polls = 0
        reported: str | None = None
        async with FleetReporter.open(self.settings, self.metrics) as reporter:
            while True:
                self._wake.clear()
                full = polls % FULL_SYNC_INTERVALS == 0 or not self.listed
                polls += 1
                try:
                    news = await self._take_listing()
                    await self.reload(sync=full or news)
                    version = self.slot.serving.version
                    if reporter is not None and (full or version != reported):
                        every = interval * (FULL_SYNC_INTERVALS if self.listed else 1)
                        if await reporter.report(self.slot.serving, every_s=every):
                            reported = version
                except Exception:  # the loop's edge: whatever broke, keep serving and polling
                    self.metrics.watch_errors.inc()
                    log.exception(
                        "model watch step failed; still serving %s", self.slot.serving.version
                    )
                # A bundle waiting for its live factors looks again soon; a listing's news
                # wakes it early.
                wait = PAIR_POLL_SEC if self._pending is not None else interval
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)


def _older_calibration(data: bytes, local: bytes | None) -> bool:
    """The trainer's file was written before ours (a replica behind the others): keep
    ours. Unreadable either way: not older (the reader judges the file)."""
    if local is None:
        return False
    try:
        theirs = LiveCalibration.model_validate_json(data).updated_at
        ours = LiveCalibration.model_validate_json(local).updated_at
    except ValueError:
        return False
    return theirs < ours
