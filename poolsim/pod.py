"""One vLLM-like pod: continuous batching with chunked prefill, KV blocks, preemption.

Each step the scheduler (vLLM v1's order) first serves running sequences in admission
order: one token per decoding sequence, a chunk of the remaining prompt per prefilling
one, within `max_batched_tokens`. A sequence whose new tokens need a block that is not
free preempts the newest running sequence (its KV is dropped and recomputed later; it
goes back to the head of the queue), or itself if it is the newest. If nothing was
preempted, waiting requests are admitted first come first served while the token budget,
`max_num_seqs` and free blocks allow; an admission first takes the prompt's leading
shared blocks from the prefix cache, and the encoding of its images that the pod's
encoder cache lacks (poolsim.encoder). A step that completes a prompt emits its first
token; each decode step emits one more. Step durations come from `Hardware.step_ms`, plus
the encoder time of the images encoded in that step (0 for text-only requests).

In a P/D pool (poolsim.roles) a pod has a role. A decode pod takes a disaggregated
request with its prompt's KV already computed (`submit(..., kv_ready=True)`): admitting
it takes blocks for the whole prompt at once (its prefix-cache hit, then new blocks for
the KV that arrived), and only the last prompt token is computed here, in a one-token
chunk that emits the first token, as vLLM's decode side does after a remote prefill.
"""

from __future__ import annotations

from collections import deque

from poolsim.blocks import BlockAllocator, CountingAllocator, KVBlockAllocator
from poolsim.encoder import EncoderCache, encode_ms
from poolsim.hardware import Hardware
from poolsim.request import Request
from poolsim.sequence import Seq


class Pod:
    def __init__(
        self, index: int, hw: Hardware, allocator: BlockAllocator | None = None, role: str = ""
    ) -> None:
        self.index = index
        self.hw = hw
        self.role = role  # "prefill", "decode" or "" (a pool without roles)
        self.allocator: BlockAllocator = allocator or KVBlockAllocator(hw.kv_blocks, hw.block_size)
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.step_end_s: float | None = None  # None when idle
        self._decodes: list[Seq] = []  # this step's decoding sequences (one token each)
        self._chunks: list[tuple[Seq, int]] = []  # this step's prompt chunks
        self._encode_ms = 0.0  # this step's encoder time (images of admitted requests)
        self.encoder = EncoderCache()
        self.prefill_pending_tokens = 0  # prompt tokens of requests without a first token
        self.uncached_pending_tokens = 0  # their uncached part, as counted at dispatch
        self.steps = 0
        self.prefill_tokens = 0
        self.decode_tokens = 0
        self.recompute_tokens = 0
        self.preemptions = 0
        self.requests_in = 0  # requests routed here
        self.encoder_tokens = 0  # vision tokens of the images of admitted requests
        self.encoder_hit_tokens = 0  # of which the encoder cache held
        self.encode_ms_total = 0.0  # encoder time added to this pod's steps

    # ---- what a picker sees
    def in_flight(self) -> int:
        return len(self.running) + len(self.waiting)

    def kv_usage(self) -> float:
        return 1.0 - self.allocator.free_blocks() / self.allocator.total

    def prefix_score(self, request: Request) -> float:
        prompt_blocks = -(-request.input_tokens // self.hw.block_size)
        return self.allocator.match(request)[0] / prompt_blocks if prompt_blocks else 0.0

    def admitted_prefill_left(self) -> int:
        """Prompt tokens that admitted (running) sequences still have to prefill after the
        step in flight: work that runs before anything still queued."""
        scheduled = {id(seq): new for seq, new in self._chunks}
        return sum(
            seq.target - seq.computed - scheduled.get(id(seq), 0)
            for seq in self.running
            if seq.computed < seq.target
        )

    # ---- requests in
    def submit(self, request: Request, now_s: float, kv_ready: bool = False) -> Seq:
        """Queue `request`; `kv_ready`: its prompt's KV arrives computed (P/D decode)."""
        seq = Seq(request, now_s, target=request.input_tokens, kv_ready=kv_ready)
        cached = self.allocator.match(request)[0] * self.hw.block_size
        seq.uncached_at_dispatch = (
            1 if kv_ready else request.input_tokens - min(cached, request.input_tokens - 1)
        )
        self.waiting.append(seq)
        self.prefill_pending_tokens += request.input_tokens
        self.uncached_pending_tokens += seq.uncached_at_dispatch
        self.requests_in += 1
        return seq

    # ---- steps
    def start_step(self, now_s: float) -> float | None:
        """Schedule one step at now_s; returns its end time, or None with nothing to do."""
        self._encode_ms = 0.0
        budget, preempted = self._schedule_running(self.hw.max_batched_tokens)
        if not preempted:
            self._admit_waiting(budget)
        if not self._decodes and not self._chunks:
            self.step_end_s = None
            return None
        self.steps += 1
        self.step_end_s = now_s + self._step_ms() / 1000.0
        return self.step_end_s

    def _step_ms(self) -> float:
        tokens = len(self._decodes)
        decode_kv = sum(seq.computed for seq in self._decodes)
        attention = 0.0
        for seq, new in self._chunks:
            tokens += new
            attention += new * (seq.computed + new / 2)
        return self.hw.step_ms(tokens, decode_kv, attention) + self._encode_ms

    def _blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.hw.block_size)

    def _schedule_running(self, budget: int) -> tuple[int, bool]:
        """Decodes (one token each) and prompt chunks of the running sequences, in order;
        a sequence short of a block preempts the newest ones (or itself)."""
        decodes: list[Seq] = []
        chunks: list[tuple[Seq, int]] = []
        self._decodes, self._chunks = decodes, chunks
        running, block, allocator = self.running, self.hw.block_size, self.allocator
        preempted = False
        index = 0
        while index < len(running) and budget > 0:
            seq = running[index]
            computed = seq.computed
            if computed < seq.target:
                new = min(seq.target - computed, budget)
                need = -(-(computed + new) // block) - seq.blocks_held
            else:  # decoding: a new block only when the last one is full
                new = 1
                need = 1 if computed % block == 0 else 0
            while need > 0 and not allocator.allocate(seq, need):
                victim = running.pop()  # the newest: it is never already in the batch
                self._preempt(victim)
                preempted = True
                if victim is seq:
                    return budget, True
            if computed < seq.target:
                chunks.append((seq, new))
            else:
                decodes.append(seq)
            budget -= new
            index += 1
        return budget, preempted

    def _preempt(self, seq: Seq) -> None:
        self.allocator.release(seq)
        seq.discarded += seq.computed
        self.recompute_tokens += seq.computed
        seq.computed = 0
        seq.target = seq.request.input_tokens + seq.generated
        seq.preemptions += 1
        self.preemptions += 1
        self.waiting.appendleft(seq)

    def _admit_waiting(self, budget: int) -> None:
        block = self.hw.block_size
        while self.waiting and budget > 0 and len(self.running) < self.hw.max_num_seqs:
            seq = self.waiting[0]
            matched, evictable = self.allocator.match(seq.request)
            if seq.kv_ready:
                if not self._admit_ready(seq, matched, evictable):
                    return
                budget -= 1
                continue
            cached = min(matched * block, seq.target - 1)
            new = min(seq.target - cached, budget)
            need = self._blocks_for(cached + new) - matched
            if need + evictable > self.allocator.free_blocks():
                return  # the head of the queue waits for memory; nothing overtakes it
            self.allocator.acquire_matched(seq, matched, evictable)
            self.allocator.allocate(seq, need)
            self.waiting.popleft()
            seq.computed = cached
            seq.prefill_cached += cached
            if seq.admissions == 0:
                seq.first_hit_tokens = cached
            seq.admissions += 1
            self.running.append(seq)
            self._chunks.append((seq, new))
            budget -= new
            if seq.request.image_ids:
                self._encode(seq.request)

    def _admit_ready(self, seq: Seq, matched: int, evictable: int) -> bool:
        """Admit a sequence whose prompt KV arrived computed: blocks for the whole prompt,
        every token but the last taken as computed, that one in this step's batch. False
        (nothing changed) while the blocks do not fit."""
        need = self._blocks_for(seq.target) - matched
        if need + evictable > self.allocator.free_blocks():
            return False
        self.allocator.acquire_matched(seq, matched, evictable)
        self.allocator.allocate(seq, need)
        self.waiting.popleft()
        cached = min(matched * self.hw.block_size, seq.target - 1)
        seq.computed = seq.target - 1
        seq.prefill_cached += cached
        seq.kv_transferred = seq.computed - cached
        seq.first_hit_tokens = cached
        seq.admissions += 1
        seq.kv_ready = False  # a preemption drops the KV: then it is recomputed here
        self.running.append(seq)
        self._chunks.append((seq, 1))  # its images were encoded on the prefill pod
        return True

    def _encode(self, request: Request) -> None:
        """An admitted request's images: those the encoder cache lacks are encoded in this
        step (again after a preemption only if evicted meanwhile)."""
        misses = self.encoder.admit(request)
        spent = encode_ms(self.hw, misses)
        self._encode_ms += spent
        self.encode_ms_total += spent
        self.encoder_tokens += request.encoder_tokens
        self.encoder_hit_tokens += request.encoder_tokens - sum(misses)

    def finish_step(self, now_s: float) -> tuple[list[Seq], list[Seq]]:
        """Apply the step that ends at now_s: (sequences that got their first token,
        sequences that finished)."""
        first: list[Seq] = []
        finished: list[Seq] = []
        emitted: list[Seq] = []
        for seq, new in self._chunks:
            seq.computed += new
            seq.prefill_computed += new
            self.prefill_tokens += new
            if seq.computed == seq.target:
                emitted.append(seq)
        self.decode_tokens += len(self._decodes)
        for seq in self._decodes:
            seq.computed += 1
            seq.decoded += 1
            seq.generated += 1
            if seq.generated == seq.request.output_tokens:
                finished.append(seq)
        for seq in emitted:  # a completed prompt emits a token too
            seq.generated += 1
            if seq.first_token_s is None:
                seq.first_token_s = now_s
                self.prefill_pending_tokens -= seq.request.input_tokens
                self.uncached_pending_tokens -= seq.uncached_at_dispatch
                first.append(seq)
            if seq.generated == seq.request.output_tokens:
                finished.append(seq)
        for seq in finished:
            seq.finish_s = now_s
            self.allocator.release(seq)
        if finished:
            self.running = [seq for seq in self.running if seq.finish_s is None]
        self._decodes, self._chunks = [], []
        self._encode_ms = 0.0
        self.step_end_s = None
        return first, finished

    # ---- look-ahead (the oracle)
    def lookahead_clone(self) -> Pod:
        """A copy that can be stepped without touching this pod (block counts only; its
        own copy of the encoder cache)."""
        real = self.allocator if isinstance(self.allocator, KVBlockAllocator) else None
        if real is None:
            raise TypeError("only a pod on a real KVBlockAllocator can be cloned")
        groups: dict[int, int] = {}
        for seq in self.running:
            group = seq.request.prefix_group
            if group is not None and seq.shared_keys:
                groups[group] = groups.get(group, 0) + 1
        clone = Pod(self.index, self.hw, CountingAllocator(real, groups))
        copies = {id(seq): seq.lookahead_copy() for seq in (*self.running, *self.waiting)}
        clone.running = [copies[id(seq)] for seq in self.running]
        clone.waiting = deque(copies[id(seq)] for seq in self.waiting)
        clone._decodes = [copies[id(seq)] for seq in self._decodes]
        clone._chunks = [(copies[id(seq)], new) for seq, new in self._chunks]
        clone._encode_ms = self._encode_ms
        clone.encoder = self.encoder.copy()
        clone.step_end_s = self.step_end_s
        clone.prefill_pending_tokens = self.prefill_pending_tokens
        clone.uncached_pending_tokens = self.uncached_pending_tokens
        return clone
