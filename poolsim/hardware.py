"""Named hardware classes: the constants of one vLLM pod's step-time and memory model.

A step's duration (ms) is a roofline over the tokens the scheduler put in it:

    memory  = step_floor_ms + ms_per_kv_ktoken * (KV tokens the decode sequences read) / 1e3
    compute = ms_per_token * (prefill tokens + decode sequences)
              + ms_per_attn_mtoken * (sum over prefill chunks of chunk x mean context) / 1e6
    step    = max(memory, compute)

A step reads all weights and the decoding sequences' KV once (memory-bound: small
batches, decode) or is bound by FLOPs (prefill chunks); whichever takes longer hides the
other. Every reported TTFT and end-to-end time adds `overhead_ms` (API server,
tokenisation, streaming). `h200` is calibrated against the recorded traces (see the
package docstring and benchmarks/README.md); `b200` is derived from it by datasheet
ratios, not calibrated.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True, slots=True)
class Hardware:
    name: str
    step_floor_ms: float
    ms_per_token: float
    ms_per_kv_ktoken: float
    ms_per_attn_mtoken: float
    overhead_ms: float
    kv_blocks: int
    block_size: int = 16
    max_batched_tokens: int = 512
    max_num_seqs: int = 256
    max_model_len: int = 16384

    def step_ms(self, batch_tokens: int, decode_kv_tokens: int, prefill_attn: float) -> float:
        memory = self.step_floor_ms + self.ms_per_kv_ktoken * decode_kv_tokens * 1e-3
        compute = self.ms_per_token * batch_tokens + self.ms_per_attn_mtoken * prefill_attn * 1e-6
        return max(memory, compute)

    @property
    def kv_tokens(self) -> int:
        return self.kv_blocks * self.block_size


# Calibrated once against benchmarks/traces/ (Qwen3-32B on one H200, streaming
# completions) by `python -m poolsim.calibrate --fit`; figures in benchmarks/README.md.
# Fixed after: no constant here was changed after a policy comparison.
H200 = Hardware(
    name="h200",
    step_floor_ms=18.0,
    ms_per_token=0.13,
    ms_per_kv_ktoken=0.02,
    ms_per_attn_mtoken=4.0,
    overhead_ms=30.0,
    kv_blocks=16_000,
    max_batched_tokens=384,
)

# A faster class, by B200/H200 datasheet ratios (not calibrated: no trace): 2.25x dense
# FLOPs (ms_per_token, attention), 1.67x memory bandwidth (floor, KV reads), and KV memory
# (180 GB x 0.9 - 70 GB of weights and activations) / (141 GB x 0.9 - 70 GB) = 1.62x.
B200 = replace(
    H200,
    name="b200",
    step_floor_ms=H200.step_floor_ms / 1.67,
    ms_per_token=H200.ms_per_token / 2.25,
    ms_per_kv_ktoken=H200.ms_per_kv_ktoken / 1.67,
    ms_per_attn_mtoken=H200.ms_per_attn_mtoken / 2.25,
    kv_blocks=int(H200.kv_blocks * 1.62),
)

HARDWARE: dict[str, Hardware] = {hw.name: hw for hw in (H200, B200)}


def hardware(name: str) -> Hardware:
    try:
        return HARDWARE[name]
    except KeyError:
        raise ValueError(f"unknown hardware class {name!r}; known: {', '.join(HARDWARE)}") from None
