"""bench_client's reference figure `bare_call_ms`: one 100-row /predict/bulk/strict POST at
a time (encode + POST + decode), through each transport, same server, same body.

Transports: `http11` (latency_client.Http11Connections, the client's hot path), `httpx`
(httpx.AsyncClient), and any module file given with `--compare-pool FILE` that defines an
`Http11Connections` (or, before it was renamed, an `Http11Pool`) with the same
`post`/`aclose` (e.g. an earlier transport, taken with
`git show <commit>:latency_client/_http11.py > /tmp/old_http11.py`; `http11.py` before
the module went private).

The machine may be loaded by others, so the transports take turns: `rounds` rounds, each
runs every transport for calls/rounds calls (in an order rotated per round, after two
unmeasured calls that reopen a connection the idle timeout closed). Per transport: the
median over rounds of this process's CPU time per call and of the wall p50/p99, the
spread of the CPU figure, and the median of the per-round (paired) CPU difference to
`http11`, which load drift affects least.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from latency_client import Http11Connections, percentiles

ROUTE = "/predict/bulk/strict"
HEADERS = {"Content-Type": "application/json"}
WARMUP_CALLS = 20


@dataclass
class Transport:
    name: str
    post: Callable[[bytes], Awaitable[bytes]]
    close: Callable[[], Awaitable[None]]
    cpu_ms: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)


def connections_transport(name: str, connections: Any, url: str) -> Transport:
    """Anything with Http11Connections' `post(base_url, path, body, headers)` and `aclose()`."""

    async def post(body: bytes) -> bytes:
        status, answer = await connections.post(url, ROUTE, body, HEADERS)
        assert status == 200, (status, answer[:200])
        return bytes(answer)

    return Transport(name, post, connections.aclose)


def httpx_transport(url: str) -> Transport:
    client = httpx.AsyncClient()

    async def post(body: bytes) -> bytes:
        return (await client.post(url + ROUTE, content=body, headers=HEADERS)).content

    return Transport("httpx", post, client.aclose)


def load_connections(path: Path) -> Any:
    """A fresh Http11Connections from a module file outside the package (the one to compare;
    files from before the rename call it Http11Pool)."""
    spec = importlib.util.spec_from_file_location(f"compare_{path.stem}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    found = getattr(module, "Http11Connections", None) or module.Http11Pool
    return found()


async def calls(transport: Transport, rows: list[dict[str, object]], n: int) -> list[float]:
    """`n` sequential calls; the wall time of each, in ms."""
    walls = []
    for _ in range(n):
        started = time.perf_counter()
        answer = await transport.post(orjson.dumps({"requests": rows}))
        assert len(orjson.loads(answer)["predictions"]) == len(rows)
        walls.append((time.perf_counter() - started) * 1000.0)
    return walls


async def one_round(transport: Transport, rows: list[dict[str, object]], n: int) -> None:
    await calls(transport, rows, 2)  # reopens the connection if the idle timeout closed it
    cpu_started = time.process_time()
    walls = await calls(transport, rows, n)
    transport.cpu_ms.append((time.process_time() - cpu_started) * 1000.0 / n)
    found = percentiles(walls)
    transport.p50_ms.append(found["p50"])
    transport.p99_ms.append(found["p99"])


def summary(transport: Transport, reference: Transport) -> dict[str, Any]:
    paired = [a - b for a, b in zip(transport.cpu_ms, reference.cpu_ms, strict=True)]
    return {
        "client_cpu_ms_per_call": round(statistics.median(transport.cpu_ms), 3),
        "client_cpu_ms_min_max": [round(min(transport.cpu_ms), 3), round(max(transport.cpu_ms), 3)],
        "cpu_ms_minus_http11_paired": round(statistics.median(paired), 3),
        "p50": round(statistics.median(transport.p50_ms), 3),
        "p99": round(statistics.median(transport.p99_ms), 3),
    }


async def bare_calls(
    url: str,
    rows: list[dict[str, object]],
    total_calls: int = 2000,
    rounds: int = 10,
    compare: Sequence[Path] = (),
) -> dict[str, Any]:
    """`total_calls` measured calls per transport, in `rounds` interleaved rounds."""
    transports = [connections_transport("http11", Http11Connections(), url), httpx_transport(url)]
    transports += [connections_transport(p.stem, load_connections(p), url) for p in compare]
    per_round = max(1, total_calls // rounds)
    try:
        for transport in transports:
            await calls(transport, rows, WARMUP_CALLS)  # connect, first-call imports
        for r in range(rounds):
            for transport in transports[r % len(transports) :] + transports[: r % len(transports)]:
                await one_round(transport, rows, per_round)
    finally:
        for transport in transports:
            await transport.close()
    result: dict[str, Any] = {t.name: summary(t, transports[0]) for t in transports}
    result["calls_per_transport"] = per_round * rounds
    result["rounds"] = rounds
    return result
