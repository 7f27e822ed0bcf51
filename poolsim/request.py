"""A request as the simulator serves it, and the per-request record it produces.

A multimodal request carries images (`image_ids`, `image_tokens`: each image's identity in
the workload's catalogue and its encoder input size in vision tokens). Their tokens are
part of `input_tokens`, as in vLLM, where an image's placeholder tokens count in the
prompt length and are prefilled like text; encoding them first is extra work
(poolsim.encoder). A text-only request has none (the default).
"""

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
    image_ids: tuple[int, ...] = ()  # distinct catalogue ids, in prompt order
    image_tokens: tuple[int, ...] = ()  # each image's vision tokens (in input_tokens)

    def __post_init__(self) -> None:
        if len(self.image_ids) != len(self.image_tokens):
            raise ValueError(f"request {self.id}: one token count per image")
        if sum(self.image_tokens) > self.input_tokens:
            raise ValueError(f"request {self.id}: image tokens exceed the prompt")

    @property
    def encoder_tokens(self) -> int:
        """The request's multimodal input size: its images' vision tokens (llm-d's
        encoder_input_size)."""
        return sum(self.image_tokens)

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
    # P/D (poolsim.roles): the prefill pod of a disaggregated request (`pod` is its decode
    # pod) and the prompt tokens found in that prefill pod's prefix cache
    prefill_pod: int | None = None
    prefill_hit_tokens: int = 0

    @property
    def slo_met(self) -> bool:
        req = self.request
        if req.slo_ttft_ms is not None and self.ttft_ms > req.slo_ttft_ms:
            return False
        tpot = self.tpot_ms
        return req.slo_tpot_ms is None or tpot is None or tpot <= req.slo_tpot_ms
