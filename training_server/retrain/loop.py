"""PoolsLoop: one thread runs the retrains and the live calibration of every pool.

Each pool's Retrainer keeps its own schedule (its clock, its warm-up, its backoff); this
loop only calls each one's tick when that schedule says so, in turn, so fits of two pools
never compete for the CPU and each retrain's duration (which sizes its next window)
measures its own fit. A new pool wakes the loop at once. Which pools this replica retrains
is each pool's own lease (training_server.pool_leases), asked by its retrainer; the loop
gives them all back at stop.

When the retrains of the last interval kept the thread busy past BUSY_SHARE of it, a pool
whose tick comes late keeps each target's last model choice (retrain.target.KeptChoice),
so that many pools on one core still retrain about once an interval.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Protocol

from training_server.retrain.live_calibration import LiveCalibrator
from training_server.retrain.retrainer import Retrainer

log = logging.getLogger(__name__)
# The loop is behind when it spent more than BUSY_SHARE of the last interval retraining
# and a pool's tick comes more than LATE_SHARE of an interval late: that retrain keeps each
# target's last model choice (retrain.target.KeptChoice), the choice being most of a
# retrain's cost. A pool on time chooses again, so under many pools the choices are made
# as the spare time allows. One pool alone (1.9 s at 200k rows every 10 s), or a few
# that fit in the interval, are never behind.
BUSY_SHARE = 0.5
LATE_SHARE = 0.1


class Releasable(Protocol):
    def release(self) -> None: ...


class PoolMember(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def retrainer(self) -> Retrainer: ...
    @property
    def calibrator(self) -> LiveCalibrator: ...


class PoolsLoop:
    def __init__(
        self,
        members: Callable[[], Sequence[PoolMember]],
        leadership: Releasable,
        *,
        calibration_interval_sec: float,
        wake: threading.Event,
    ):
        """`members`: the pools now (read every pass); `wake` is set when one is added."""
        self.members = members
        self.leadership = leadership
        self.calibration_interval = calibration_interval_sec
        self._wake = wake
        self._next_tick: dict[str, float] = {}  # pool -> monotonic time of its next tick
        self._busy: deque[tuple[float, float]] = deque()  # (end, seconds) of recent ticks
        self._next_calibration = 0.0
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="retrainer", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 30.0) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout)
        self.leadership.release()  # a follower takes over on its next try, not at our death

    def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()  # before the pass: a pool added during it wakes the wait
            wait = self.run_due()
            self._wake.wait(wait)

    @staticmethod
    def interval_of(member: PoolMember) -> float:
        return member.retrainer.settings.retraining_interval_sec

    def busy_share(self, window: float) -> float:
        """The share of the last `window` seconds spent in retrain ticks."""
        since = time.monotonic() - window
        while self._busy and self._busy[0][0] < since:
            self._busy.popleft()
        return sum(seconds for _, seconds in self._busy) / window if window > 0 else 0.0

    def run_due(self) -> float:
        """Tick every pool whose schedule is due, and the live calibrations when theirs
        is; returns the seconds until the next is due."""
        members = list(self.members())
        for member in members:
            if self._stopping:
                return 0.0
            started = time.monotonic()
            due = self._next_tick.get(member.name)
            if due is None or due <= started:
                interval = self.interval_of(member)
                late = due is not None and started - due > LATE_SHARE * interval
                behind = late and self.busy_share(interval) > BUSY_SHARE
                wait = member.retrainer.tick(behind=behind)
                ended = time.monotonic()
                self._busy.append((ended, ended - started))
                self._next_tick[member.name] = ended + wait
        if time.monotonic() >= self._next_calibration:
            for member in members:
                try:
                    member.calibrator.tick()
                except Exception:  # a store hiccup: the factor just waits for the next tick
                    log.exception("live calibration of pool %s failed", member.name)
            self._next_calibration = time.monotonic() + self.calibration_interval
        soonest = min([self._next_calibration, *self._next_tick.values()])
        return max(0.0, soonest - time.monotonic())
