"""PoolsLoop: one thread runs the retrains and the live calibration of every pool.

Each pool's Retrainer keeps its own schedule (its clock, its warm-up, its backoff); this
loop only calls each one's tick when that schedule says so, in turn, so fits of two pools
never compete for the CPU and each retrain's duration (which sizes its next window)
measures its own fit. A new pool wakes the loop at once. The leadership among training
replicas is one lock for every pool, released once at stop.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from training_server.leadership import Leadership
from training_server.retrain.live_factor import LiveCalibrator
from training_server.retrain.loop import Retrainer

log = logging.getLogger(__name__)


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
        leadership: Leadership,
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

    def run_due(self) -> float:
        """Tick every pool whose schedule is due, and the live calibrations when theirs
        is; returns the seconds until the next is due."""
        members = list(self.members())
        for member in members:
            if self._stopping:
                return 0.0
            if self._next_tick.get(member.name, 0.0) <= time.monotonic():
                self._next_tick[member.name] = time.monotonic() + member.retrainer.tick()
        if time.monotonic() >= self._next_calibration:
            for member in members:
                try:
                    member.calibrator.tick()
                except Exception:  # a store hiccup: the factor just waits for the next tick
                    log.exception("live calibration of pool %s failed", member.name)
            self._next_calibration = time.monotonic() + self.calibration_interval
        soonest = min([self._next_calibration, *self._next_tick.values()])
        return max(0.0, soonest - time.monotonic())
