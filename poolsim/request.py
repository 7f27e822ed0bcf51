"""A request as the simulator serves it, and the per-request record it produces."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Request:
    """One inference request. `prefix_group` names the shared prefix (system prompt or
    document) its first `prefix_tokens` tokens come from; requests of one group share those
    tokens exactly, and nothing else is ever shared between requests."""

    id: int
    arrival_s: float
    input_tokens: int
    output_tokens: int
    prefix_group: int | None = None
    prefix_tokens: int = 0
    slo_ttft_ms: float | None = None
    slo_tpot_ms: float | None = None

    def shared_blocks(self, block_size: int) -> int:
        """Full KV blocks of the prompt that lie inside the shared prefix (cacheable)."""
        if self.prefix_group is None:
            return 0
        return min(self.prefix_tokens, self.input_tokens) // block_size


@dataclass(frozen=True, slots=True)
class Completion:
    """What one served request measured. Times are simulated seconds; latencies in ms and
    include the hardware's per-request serving overhead."""

    request: Request
    pod: int
    dispatch_s: float
    first_token_s: float
    finish_s: float
    ttft_ms: float
    tpot_ms: float | None  # None for a single output token
    e2e_ms: float
    prefix_hit_tokens: int  # prompt tokens found in the pod's prefix cache at admission
    preemptions: int

    @property
    def slo_met(self) -> bool:
        req = self.request
        if req.slo_ttft_ms is not None and self.ttft_ms > req.slo_ttft_ms:
            return False
        tpot = self.tpot_ms
        return req.slo_tpot_ms is None or tpot is None or tpot <= req.slo_tpot_ms
