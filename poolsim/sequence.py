"""One request's life inside a pod: what it holds and what it has computed."""

from __future__ import annotations

from dataclasses import dataclass, field

from poolsim.request import Request


@dataclass(slots=True, eq=False)
class Seq:
    request: Request
    dispatch_s: float
    # tokens whose KV must be computed before the next output token: the prompt, or after a
    # preemption the prompt plus every token generated so far (vLLM recomputes them)
    target: int
    computed: int = 0  # tokens whose KV this pod holds now (cached hits included)
    generated: int = 0  # output tokens produced
    shared_keys: list[int] = field(default_factory=list)
    own_blocks: int = 0
    blocks_held: int = 0
    first_token_s: float | None = None
    finish_s: float | None = None
    # accounting, checked by the tests' conservation invariants
    prefill_computed: int = 0  # prompt (or recompute) tokens computed in prefill chunks
    prefill_cached: int = 0  # tokens taken from the prefix cache at admissions
    decoded: int = 0  # decode steps (each feeds one generated token back)
    discarded: int = 0  # KV tokens thrown away by preemptions (recomputed later)
    preemptions: int = 0
    admissions: int = 0
    first_hit_tokens: int = 0  # prefix-cache hit at the first admission
    uncached_at_dispatch: int = 0  # prompt tokens not in the pod's prefix cache at submit
    # P/D: the prompt's KV comes computed from a prefill pod (poolsim.roles); the first
    # admission takes it instead of prefilling, and a preemption drops it (recomputed here)
    kv_ready: bool = False
    kv_transferred: int = 0  # prompt tokens whose KV arrived from the prefill pod

    @property
    def prefilling(self) -> bool:
        return self.computed < self.target

    @property
    def done(self) -> bool:
        return self.finish_s is not None

    def lookahead_copy(self) -> Seq:
        """A copy whose block holdings are counts only (for a CountingAllocator)."""
        copy = Seq(self.request, self.dispatch_s, self.target, self.computed, self.generated)
        copy.own_blocks = self.own_blocks
        copy.blocks_held = self.blocks_held
        copy.first_token_s = self.first_token_s
        copy.uncached_at_dispatch = self.uncached_at_dispatch
        copy.kv_ready = self.kv_ready
        return copy
