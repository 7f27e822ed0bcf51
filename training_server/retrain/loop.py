"""PoolsLoop: one thread runs the retrains and the live calibration of every pool.

Each pool's Retrainer keeps its own schedule (its clock, its warm-up, its backoff); this
loop only calls each one's tick when that schedule says so, in turn, so fits of two pools
never compete for the CPU and each retrain's duration (which sizes its next window)
measures its own fit. A new pool wakes the loop at once, and so do a pool's new rows: its
live factor is stepped then, between retrains, besides once a second. Which pools this
replica retrains is each pool's own lease (training_server.pool_leases), asked by its
retrainer; the loop gives them all back at stop.

A pool chooses its models again only when its tick comes on time, the other pools'
retrains of the last interval left the thread idle for more than 1 - BUSY_SHARE of it, and
the choice would not make the next pool's tick late; otherwise its retrain keeps each
target's last model choice (retrain.target.KeptChoice), so that many pools on one core
still retrain about once an interval and choose in the spare time.
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
from training_server.retrain_record import RetrainRecord

log = logging.getLogger(__name__)
# A pool's retrain keeps each target's last model choice (retrain.target.KeptChoice), the
# choice being most of a retrain's cost, when the loop is behind: it spent more than
# BUSY_SHARE of the last interval retraining other pools, or the pool's tick comes more than
# LATE_SHARE of an interval late, or choosing (as long as the pool's last choice took)
# would make the next pool's tick that late. So the choices go where the others leave
# time and never make a queue: 50 pools, choosing whenever on time (late by at most 0.1
# of the interval), had gaps of p90 11.2-11.6 s every 10 s, each choice delaying the pools
# behind it, which then chose too; now 10.1-10.3 s (benchmarks/README.md). One pool
# alone (1.9 s at 200k rows every 10 s), or a few that fit in the interval, are never
# behind. A pool without a choice yet always chooses.
BUSY_SHARE = 0.5
LATE_SHARE = 0.02


class Releasable(Protocol):
    def release(self) -> None: ...


def keeps_choice(late_by: float, busy_share: float, interval: float, overrun: float) -> bool:
    """Whether a pool's retrain keeps its last model choice: its tick came `late_by` seconds
    after it was due, the loop spent `busy_share` of the last `interval` retraining, and a
    choice would run `overrun` seconds past the next pool's tick (<= 0: it ends before)."""
    tolerated = LATE_SHARE * interval
    return late_by > tolerated or busy_share > BUSY_SHARE or overrun > tolerated


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
        arrived: Callable[[], set[str]] = set,
    ):
        """`members`: the pools now (read every pass); `wake` is set when one is added or
        rows arrive; `arrived` gives (and forgets) the pools whose rows arrived."""
        self.members = members
        self.arrived = arrived
        self.leadership = leadership
        self.calibration_interval = calibration_interval_sec
        self._wake = wake
        self._next_tick: dict[str, float] = {}  # pool -> monotonic time of its next tick
        self._choice_seconds: dict[str, float] = {}  # pool -> its last retrain that chose
        # (end, seconds, pool) of recent ticks
        self._busy: deque[tuple[float, float, str]] = deque()
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

    def busy_share(self, window: float, excluding: str | None = None) -> float:
        """The share of the last `window` seconds spent in retrain ticks (but pool
        `excluding`'s own: a pool alone keeping its choice would free time for no one)."""
        since = time.monotonic() - window
        while self._busy and self._busy[0][0] < since:
            self._busy.popleft()
        spent = sum(seconds for _, seconds, pool in self._busy if pool != excluding)
        return spent / window if window > 0 else 0.0

    def overrun(self, name: str, at: float) -> float:
        """How far past the next other pool's tick a choice of pool `name` started `at`
        would run, if it takes as long as its last one (0: none yet, or no other pool)."""
        others = [due for pool, due in self._next_tick.items() if pool != name]
        last = self.last_choice_seconds(name)
        return 0.0 if last is None or not others else at + last - min(others)

    def last_choice_seconds(self, name: str) -> float | None:
        """How long pool `name`'s last retrain that chose its models took (None: none yet)."""
        return self._choice_seconds.get(name)

    def _note_choice(self, member: PoolMember, before: RetrainRecord | None) -> None:
        """Remember how long the pool's retrain took if it chose a model (the next choice
        of the same pool, on about as many rows, takes about as long)."""
        record = member.retrainer.state.last_success
        chose = record is not None and any((record.model_candidates or {}).values())
        if record is not None and record is not before and chose:
            self._choice_seconds[member.name] = record.duration_s

    def _calibrate(self, member: PoolMember) -> None:
        try:
            member.calibrator.tick()
        except Exception:  # a store hiccup: the factor just waits for the next tick
            log.exception("live calibration of pool %s failed", member.name)

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
                late_by = 0.0 if due is None else started - due
                busy = self.busy_share(interval, excluding=member.name)
                overrun = self.overrun(member.name, started)
                behind = keeps_choice(late_by, busy, interval, overrun)
                before = member.retrainer.state.last_success
                served = member.retrainer.slot.published
                wait = member.retrainer.tick(behind=behind)
                self._note_choice(member, before)
                if member.retrainer.slot.published is not served:
                    # Prediction servers serve a new bundle once the live factors are
                    # rebased onto it (the file names it): rebase now, not at the next tick.
                    self._calibrate(member)
                ended = time.monotonic()
                self._busy.append((ended, ended - started, member.name))
                self._next_tick[member.name] = ended + wait
        arrived = self.arrived()
        if time.monotonic() >= self._next_calibration:
            for member in members:
                self._calibrate(member)
            self._next_calibration = time.monotonic() + self.calibration_interval
        else:
            # Rows just arrived: step their pool's live factor now. On the clock alone the
            # step came up to a second after the EPP's flush, often just before its next
            # predictions, too late for them: the factor answered a batch two batches
            # later instead of one (benchmarks/README.md).
            for member in members:
                if member.name in arrived:
                    self._calibrate(member)
        soonest = min([self._next_calibration, *self._next_tick.values()])
        return max(0.0, soonest - time.monotonic())
