"""One /predict/bulk/strict exchange with failover: a failed or timed-out replica is put in
back-off and the call is retried once on another replica, within the caller's deadline."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import orjson

from latency_client._errors import PredictionRejected, PredictionUnavailable
from latency_client._http11 import Http11Connections, HttpError
from latency_client._replicas import Replica, ReplicaSet
from latency_client._stats import Stats
from latency_client._types import Prediction, Row

ROUTE = "/predict/bulk/strict"


@dataclass(frozen=True, slots=True)
class Answer:
    predictions: list[Prediction]
    exchange_s: float  # encode + the answering attempt's POST + decode


class RowsRejected(PredictionRejected):
    """A 422 naming rows of the merged body; `rows` holds their indices (empty: unknown)."""

    def __init__(self, message: str, detail: object, rows: set[int]) -> None:
        super().__init__(message, detail)
        self.rows = rows


class _AttemptFailed(Exception):
    """This replica did not answer 200 in time: try another one. `replica_at_fault` is
    False when the caller's deadline, not the attempt budget, cut the attempt short: that
    says nothing against the replica, so it stays out of back-off."""

    def __init__(self, message: str, replica_at_fault: bool = True) -> None:
        super().__init__(message)
        self.replica_at_fault = replica_at_fault


def _as_dict(value: object) -> dict[str, object]:
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def encode_rows(rows: Sequence[Row], key: str = "requests") -> bytes:
    # Rows that are dicts go straight through orjson; other mappings are copied on the way.
    return orjson.dumps({key: rows}, default=_as_dict)


def _splits(answer: dict[str, object], target: str) -> int | None:
    value = answer.get(f"{target}_model_splits")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def decode_answer(body: bytes, expected: int) -> tuple[list[Prediction], float]:
    """The predictions in input order and the server's processing_time_ms."""
    try:
        answer = orjson.loads(body)
        rows = answer["predictions"]
        version = str(answer.get("model_version", ""))
        splits = _splits(answer, "ttft"), _splits(answer, "tpot")
        predictions = [
            Prediction(
                float(p["ttft_ms"]), float(p["tpot_ms"]), p.get("model_version", version), *splits
            )
            for p in rows
        ]
        server_ms = float(answer.get("processing_time_ms", 0.0))
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError, AttributeError) as exc:
        raise _AttemptFailed(f"malformed answer: {exc!r}") from None
    if len(predictions) != expected:
        raise _AttemptFailed(f"{len(predictions)} predictions for {expected} rows")
    return predictions, server_ms


def rejected_rows(detail: object) -> set[int]:
    """Row indices a FastAPI 422 names (loc = ["body", "requests", index, field])."""
    found: set[int] = set()
    if isinstance(detail, list):
        for error in detail:
            loc = error.get("loc") if isinstance(error, dict) else None
            if (
                isinstance(loc, list)
                and len(loc) > 2
                and loc[1] == "requests"
                and isinstance(loc[2], int)
            ):
                found.add(loc[2])
    return found


class StrictCaller:
    def __init__(
        self,
        http: Http11Connections,
        replicas: ReplicaSet,
        stats: Stats,
        attempt_timeout_s: float,
        headers: dict[str, str],
    ) -> None:
        self._http, self._replicas, self._stats = http, replicas, stats
        self._attempt_timeout_s = attempt_timeout_s
        self._headers = {"Content-Type": "application/json", **headers}

    async def call(self, rows: Sequence[Row], deadline: float) -> Answer:
        """`deadline` is on the event loop's clock. Raises PredictionUnavailable or
        RowsRejected; never anything else."""
        started = time.perf_counter()
        body = encode_rows(rows)
        encode_s = time.perf_counter() - started
        first = self._replicas.choose()
        assert first is not None  # a ReplicaSet is never empty
        try:
            return await self._attempt(first, body, len(rows), deadline, encode_s)
        except _AttemptFailed as exc:
            self._failed(first, exc)
            second = self._replicas.choose(exclude=first)
            if second is None or deadline <= asyncio.get_running_loop().time():
                raise PredictionUnavailable(f"{first.url}: {exc}") from None
            return await self._failover(second, body, len(rows), deadline, encode_s)

    async def _failover(
        self, replica: Replica, body: bytes, n: int, deadline: float, encode_s: float
    ) -> Answer:
        self._stats.counters.retries += 1
        try:
            answer = await self._attempt(replica, body, n, deadline, encode_s)
        except _AttemptFailed as exc:
            self._failed(replica, exc)
            raise PredictionUnavailable(f"{replica.url} (after a failover): {exc}") from None
        self._stats.counters.failovers += 1
        return answer

    def _failed(self, replica: Replica, exc: _AttemptFailed) -> None:
        self._stats.counters.failed_attempts += 1
        if exc.replica_at_fault:
            self._replicas.failed(replica)

    async def _attempt(
        self, replica: Replica, body: bytes, n: int, deadline: float, encode_s: float
    ) -> Answer:
        remaining = deadline - asyncio.get_running_loop().time()
        timeout = min(self._attempt_timeout_s, remaining)
        if timeout <= 0:
            raise _AttemptFailed("no time left", replica_at_fault=False)
        started = time.perf_counter()
        try:
            async with asyncio.timeout(timeout):
                status, content = await self._http.post(replica.url, ROUTE, body, self._headers)
        except TimeoutError:
            cut_short = timeout < self._attempt_timeout_s
            raise _AttemptFailed(f"no answer in {timeout:.3f} s", not cut_short) from None
        except HttpError as exc:
            raise _AttemptFailed(str(exc)) from None
        if status == 422:
            self._replicas.succeeded(replica)  # the server is fine; the rows are not
            raise self._rejected(content)
        if status != 200:
            raise _AttemptFailed(f"HTTP {status}")
        predictions, server_ms = decode_answer(content, n)
        self._replicas.succeeded(replica)
        exchange_s = encode_s + time.perf_counter() - started
        counters = self._stats.counters
        counters.calls += 1
        counters.rows += n
        self._stats.observe("http", exchange_s * 1000.0)
        self._stats.observe("server", server_ms)
        return Answer(predictions, exchange_s)

    @staticmethod
    def _rejected(body: bytes) -> RowsRejected:
        try:
            detail = orjson.loads(body).get("detail")
        except (orjson.JSONDecodeError, AttributeError):
            detail = body[:500].decode(errors="replace")
        return RowsRejected("the server refused rows (422)", detail, rejected_rows(detail))
