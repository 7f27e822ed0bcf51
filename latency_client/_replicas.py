"""Which prediction replica gets the next call: healthy ones in turn, a failed one skipped
for a back-off period that doubles with each failure in a row."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class Replica:
    url: str
    failures_in_a_row: int = 0
    retry_at: float = 0.0  # clock time before which it is skipped
    calls: int = 0
    failures: int = 0


class ReplicaSet:
    """Round robin over the replicas not in back-off. When all are in back-off the one whose
    back-off ends first is tried anyway: a probe is cheaper than a certain failure."""

    def __init__(
        self,
        urls: Sequence[str],
        *,
        backoff_s: float = 1.0,
        max_backoff_s: float = 30.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not urls:
            raise ValueError("at least one prediction server URL is needed")
        self.replicas = [Replica(url.rstrip("/")) for url in urls]
        self._backoff_s, self._max_backoff_s, self._clock = backoff_s, max_backoff_s, clock
        self._next = 0

    def choose(self, exclude: Replica | None = None) -> Replica | None:
        """The next replica to call, never `exclude`; None only when `exclude` is the only one."""
        now = self._clock()
        count = len(self.replicas)
        for step in range(count):
            replica = self.replicas[(self._next + step) % count]
            if replica is not exclude and replica.retry_at <= now:
                self._next = (self._next + step + 1) % count
                return replica
        waiting = [r for r in self.replicas if r is not exclude]
        return min(waiting, key=lambda r: r.retry_at) if waiting else None

    def succeeded(self, replica: Replica) -> None:
        replica.calls += 1
        replica.failures_in_a_row = 0
        replica.retry_at = 0.0

    def failed(self, replica: Replica) -> None:
        replica.calls += 1
        replica.failures += 1
        replica.failures_in_a_row += 1
        backoff = self._backoff_s * 2.0 ** min(30, replica.failures_in_a_row - 1)
        replica.retry_at = self._clock() + min(self._max_backoff_s, backoff)

    def healthy(self) -> list[str]:
        now = self._clock()
        return [r.url for r in self.replicas if r.retry_at <= now]
