"""Our real training and prediction servers for the predictor policies, started once per
`advise` run and trained before the first paced run.

`simulate` starts a fresh trainer per run, so its predictor policies begin on the
cold-start prior; the README measures that the first simulated minute is where they lose.
A pool that turned the predictor on runs it warm, so here one LocalPredictor (poolsim's:
SQLite in a temp dir, time constants divided by the speedup) serves every paced run, and
before the first it is fed the training rows the EPP would have sent for the first
unpaced run's requests (the same simulated pods, routed by a heuristic) and retrained.
Every paced run then keeps feeding it, as in simulate. Ended by PID in `stop()`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING

import httpx

from poolsim.hardware import is_mixed
from poolsim.policy_api import Observation, PodFeatures, Policy, PolicyOptions, RequestInfo
from poolsim.predictor_servers import LocalPredictor
from poolsim.request import Request

if TYPE_CHECKING:
    from poolsim.pod import Pod

TrainingRow = dict[str, float | int | str]  # the wire row, as poolsim builds it
BULK_ROWS = 5000  # per /add_training_data_bulk call (the trainer's limit is 10,000)
READY_TIMEOUT_S = 30.0


class Recording:
    """A policy that also keeps the training rows the EPP would send for its requests, and
    each row's request arrival (simulated seconds). In a pool mixing hardware classes the
    rows carry `pod_class`, as our predictor policies send it there (poolsim.predicted), so
    a predictor warmed on them, or a store filled with them, knows each row's class."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name, self.paced = inner.name, inner.paced
        self.rows: list[TrainingRow] = []
        self.arrival_s: list[float] = []
        self.with_class = False  # set by attach(): the pool is mixed

    def attach(self, pods: Sequence[Pod], requests: Mapping[int, Request]) -> None:
        self.with_class = is_mixed([pod.hw for pod in pods])
        self.inner.attach(pods, requests)

    async def start(self, speedup: float | None) -> None:
        await self.inner.start(speedup)

    def choose(
        self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float
    ) -> int | Awaitable[int]:
        return self.inner.choose(request, pods, now_s)

    def observe(self, observation: Observation) -> Awaitable[None] | None:
        rows = observation.training_rows(pod_class=self.with_class)
        self.rows.extend(rows)
        self.arrival_s.extend([observation.completion.request.arrival_s] * len(rows))
        return self.inner.observe(observation)

    async def close(self) -> None:
        await self.inner.close()

    def summary(self) -> dict[str, float]:
        return self.inner.summary()


class SharedPredictor:
    """One LocalPredictor for the whole advice, started in a background thread."""

    def __init__(self, speedup: float) -> None:
        self.local = LocalPredictor(speedup)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._start, name="advise-servers", daemon=True)
        self.trained_rows = 0

    def _start(self) -> None:
        try:
            self.local.start()
        except BaseException as exc:  # reported by ready()
            self._error = exc

    def begin(self) -> SharedPredictor:
        self._thread.start()
        return self

    def ready(self) -> None:
        self._thread.join()
        if self._error is not None:
            raise RuntimeError(f"the predictor servers did not start: {self._error}")

    def options(self, seed: int, speedup: float) -> PolicyOptions:
        return PolicyOptions(
            seed=seed,
            speedup=speedup,
            training_url=self.local.training_url,
            prediction_urls=tuple(self.local.prediction_urls),
        )

    def train(self, rows: Sequence[TrainingRow]) -> bool:
        """Send the rows, retrain, and wait until the prediction servers serve a trained
        model; False when none came within READY_TIMEOUT_S (too few rows: the runs then
        start on the prior, as in simulate)."""
        self.ready()
        url = self.local.training_url
        with httpx.Client(timeout=60.0, trust_env=False) as client:
            for start in range(0, len(rows), BULK_ROWS):
                body = {"entries": list(rows[start : start + BULK_ROWS])}
                client.post(f"{url}/add_training_data_bulk", json=body).raise_for_status()
            client.post(f"{url}/retrain").raise_for_status()
            self.trained_rows = len(rows)
            return self._wait_trained(client)

    def _wait_trained(self, client: httpx.Client) -> bool:
        deadline = time.monotonic() + READY_TIMEOUT_S
        for url in self.local.prediction_urls:
            while client.get(f"{url}/readyz").json().get("cold_start") is not False:
                if time.monotonic() > deadline:
                    return False
                time.sleep(0.1)
        return True

    def stop(self) -> None:
        if self._thread.is_alive():
            self._thread.join()
        self.local.stop()
