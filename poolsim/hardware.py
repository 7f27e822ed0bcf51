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
package docstring and benchmarks/README.md); `b200` (faster) and `a100` (older, slower) are
derived from it by datasheet ratios, not calibrated.
"""

from __future__ import annotations

from collections.abc import Sequence
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

# An older, slower class by the same method (not calibrated): a pod of two A100-80GB SXM
# with tensor parallelism 2, the smallest A100 pod that holds a 32B model in BF16. Datasheet
# figures against one H200: dense BF16 2 x 312 = 624 TFLOPS against 989 (1.585x slower
# compute), HBM 2 x 2,039 = 4,078 GB/s against 4,800 (1.177x slower reads), and KV memory
# (160 GB x 0.9 - 70 GB) / (141 GB x 0.9 - 70 GB) = 1.30x. The all-reduce between the two
# GPUs is not modelled, so this pod is if anything a little fast.
A100 = replace(
    H200,
    name="a100",
    step_floor_ms=H200.step_floor_ms * 1.177,
    ms_per_token=H200.ms_per_token * 1.585,
    ms_per_kv_ktoken=H200.ms_per_kv_ktoken * 1.177,
    ms_per_attn_mtoken=H200.ms_per_attn_mtoken * 1.585,
    kv_blocks=int(H200.kv_blocks * 1.30),
)

HARDWARE: dict[str, Hardware] = {hw.name: hw for hw in (H200, B200, A100)}


def hardware(name: str) -> Hardware:
    try:
        return HARDWARE[name]
    except KeyError:
        raise ValueError(f"unknown hardware class {name!r}; known: {', '.join(HARDWARE)}") from None


class HardwareSpecError(ValueError):
    """A `--hardware` value that names no pool (the message says why)."""


HARDWARE_SPEC_HELP = (
    "CLASS (every pod of that class) or CLASS:COUNT[,CLASS:COUNT...] (a mixed pool, the "
    "pods in that order; --pods defaults to the counts' sum and must equal it when given)"
)


def parse_hardware(spec: str, pods: int | None, default_pods: int = 8) -> list[Hardware]:
    """Each pod's class, in pod order, from a `--hardware` value and `--pods` (None: not
    given). `h200` alone: all pods (`default_pods` of them without --pods) of that class.
    `h200:4,b200:4`: that many of each, in that order; --pods, when given, must equal
    the sum. HardwareSpecError naming the problem otherwise."""
    parts = [part.strip() for part in spec.split(",")]
    if not spec.strip() or not all(parts):
        raise HardwareSpecError(f"--hardware {spec!r}: empty class; {HARDWARE_SPEC_HELP}")
    if len(parts) == 1 and ":" not in parts[0]:
        count = default_pods if pods is None else pods
        if count < 1:
            raise HardwareSpecError(f"--pods must be positive, not {count}")
        return [_known(parts[0], spec)] * count
    pool: list[Hardware] = []
    seen: set[str] = set()
    for part in parts:
        name, colon, count_text = part.partition(":")
        if not colon:
            raise HardwareSpecError(
                f"--hardware {spec!r}: {part!r} has no count; with several classes each "
                f"needs one ({HARDWARE_SPEC_HELP})"
            )
        hw = _known(name.strip(), spec)
        if hw.name in seen:
            raise HardwareSpecError(f"--hardware {spec!r}: {hw.name} is listed twice")
        seen.add(hw.name)
        try:
            count = int(count_text)
        except ValueError:
            count = 0
        if count < 1:
            raise HardwareSpecError(
                f"--hardware {spec!r}: the count of {hw.name} must be a positive integer, "
                f"not {count_text!r}"
            )
        pool += [hw] * count
    if pods is not None and pods != len(pool):
        raise HardwareSpecError(
            f"--hardware {spec!r} has {len(pool)} pods but --pods is {pods}: leave --pods "
            "out (it defaults to the counts' sum) or make them agree"
        )
    return pool


def _known(name: str, spec: str) -> Hardware:
    try:
        return hardware(name)
    except ValueError as exc:
        raise HardwareSpecError(f"--hardware {spec!r}: {exc}") from None


def pool_label(pool: Sequence[Hardware]) -> str:
    """`h200` for a pool of one class, `h200:4,b200:4` for a mixed one (counts in order)."""
    counts: dict[str, int] = {}
    for hw in pool:
        counts[hw.name] = counts.get(hw.name, 0) + 1
    if len(counts) == 1:
        return next(iter(counts))
    return ",".join(f"{name}:{count}" for name, count in counts.items())


def is_mixed(pool: Sequence[Hardware]) -> bool:
    """More than one class in the pool."""
    return len({hw.name for hw in pool}) > 1
