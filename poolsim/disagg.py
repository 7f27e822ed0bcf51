"""The engine's bookkeeping of prefill/decode (P/D) disaggregated requests.

A split request (poolsim.roles) lives in three stages. At arrival the engine routes it
to a decode pod and a prefill pod, and submits to the prefill pod a copy asking for one
output token: the prefill only. When that copy finishes, the KV transfer starts; it
ends `KvTransfer.seconds(tokens)` later, `tokens` being the prompt tokens the decode pod's
prefix cache lacks at that moment (what vLLM's decode side pulls). Then the request
itself goes to the decode pod with its prompt's KV ready (poolsim.pod), where it gets
its first token one step after admission, and the rest as any decode. Its TTFT runs from
arrival to that first token: prefill queue, prefill, transfer and the first decode step.
The decode pod sees the request only from the transfer's end (llm-d's decode side
likewise hands it to vLLM once the prefill returned); transfers do not contend.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass, replace

from poolsim.pod import Pod
from poolsim.request import Request
from poolsim.roles import PdConfig, disaggregate, uncached_tokens
from poolsim.sequence import Seq


@dataclass(slots=True)
class PdRoute:
    """Where one request of a P/D pool went: its decode pod, and its prefill pod when
    split (with the prefill pod's prefix hit and the transfer's length, once known)."""

    decode: int
    prefill: int | None = None
    prefill_hit_tokens: int = 0
    transfer_s: float | None = None


class PdFlow:
    def __init__(self, config: PdConfig) -> None:
        self.config = config
        self.routes: dict[int, PdRoute] = {}  # request id -> route, every routed request
        self._prefilling: dict[int, Request] = {}  # request id -> request, prefill stage
        self._transfers: list[tuple[float, int]] = []  # (end, request id)
        self._in_transfer: dict[int, Request] = {}

    def splits(self, request: Request, decode: Pod) -> bool:
        """The decider on the chosen decode pod (poolsim.roles.disaggregate)."""
        matched = decode.allocator.match(request)[0]
        uncached = uncached_tokens(request, matched, decode.hw.block_size)
        return disaggregate(uncached, self.config.threshold)

    def route_whole(self, request: Request, decode: int) -> None:
        """The decode pod serves `request` whole (under the decider's threshold)."""
        self.routes[request.id] = PdRoute(decode)

    def route_split(self, request: Request, prefill: int, decode: int) -> Request:
        """Split `request`; returns the prefill stage to submit to the prefill pod."""
        self.routes[request.id] = PdRoute(decode, prefill)
        self._prefilling[request.id] = request
        return replace(request, output_tokens=1)

    def is_prefill_stage(self, seq: Seq) -> bool:
        return seq.request.id in self._prefilling

    def prefill_done(self, seq: Seq, pods: Sequence[Pod], now_s: float) -> None:
        """The prefill stage of a split request finished at now_s: its transfer starts."""
        request = self._prefilling.pop(seq.request.id)
        route = self.routes[request.id]
        route.prefill_hit_tokens = seq.first_hit_tokens
        decode = pods[route.decode]
        matched = decode.allocator.match(request)[0]
        route.transfer_s = self.config.transfer.seconds(
            uncached_tokens(request, matched, decode.hw.block_size)
        )
        heapq.heappush(self._transfers, (now_s + route.transfer_s, request.id))
        self._in_transfer[request.id] = request

    def next_transfer_s(self) -> float | None:
        """When the next transfer ends (None: none in flight)."""
        return self._transfers[0][0] if self._transfers else None

    def pending(self) -> bool:
        return bool(self._transfers)

    def pop_transfer(self) -> tuple[Request, int]:
        """The request whose transfer ends first, and its decode pod's index."""
        _, request_id = heapq.heappop(self._transfers)
        request = self._in_transfer.pop(request_id)
        return request, self.routes[request_id].decode


def comes_first(moved: float, step: float | None, arrival: float | None) -> bool:
    """A transfer end at `moved` comes before (or with) the next step end and arrival."""
    return (step is None or moved <= step) and (arrival is None or moved <= arrival)
