"""Rebuild a trace row's pod on the simulator and serve the row's request on it.

Each trace row gives one pod's state when a request was dispatched (KV usage, waiting
requests, the picker's in-flight count, prompt tokens still to prefill) and what that
request then measured (TTFT or TPOT). The rebuilt pod has:

- prefill-pending requests: `num_request_waiting` (one more if tokens are pending with
  nobody waiting: a prompt being prefilled), sharing `prefill_tokens_in_flight` equally,
  queued ahead of the measured request;
- decoding requests: the rest of the in-flight count, holding `kv_cache_percentage` of the
  pod's blocks equally, each with a remaining output drawn uniformly below a length from
  the trace's output model;
- a closed background: each background request that finishes is replaced by a fresh one
  (prompt drawn from the trace's prompts, output from its output model) joining the queue,
  so the load stays at the row's level while the measured request is served, as the
  recorded traffic kept arriving;
- the measured request arrives at a uniformly random point of the first step.

The traces do not record output lengths (the specs give 1..1024 tokens); the output model
per trace is an assumption stated in `OUTPUTS`.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from poolsim.hardware import Hardware
from poolsim.pod import Pod
from poolsim.request import Request
from poolsim.sequence import Seq

# The recorded traces shipped with the benchmarks (benchmarks/traces/README.md).
TRACE_DIR = Path(__file__).resolve().parents[1] / "benchmarks" / "traces"
TRACES = ("sharegpt-h200", "chatbot-synthetic-h200")
MAX_SIM_S = 1200.0


@dataclass(frozen=True, slots=True)
class OutputModel:
    """Output lengths: lognormal with this median and sigma, clipped to 1..cap."""

    median: float
    sigma: float
    cap: int = 1024

    def draw(self, rng: random.Random) -> int:
        value = self.median * math.exp(self.sigma * rng.gauss(0.0, 1.0))
        return max(1, min(self.cap, round(value)))


OUTPUTS: dict[str, OutputModel] = {
    "sharegpt-h200": OutputModel(median=200, sigma=1.0),
    "chatbot-synthetic-h200": OutputModel(median=600, sigma=0.6),
}


def load_rows(name: str, trace_dir: Path = TRACE_DIR) -> list[dict[str, float]]:
    with (trace_dir / f"{name}.jsonl").open() as fh:
        return [json.loads(line) for line in fh if line.strip()]


class Reconstruction:
    """One trace row's pod, the measured request on it, and the closed background."""

    def __init__(
        self,
        row: dict[str, float],
        hw: Hardware,
        prompts: Sequence[int],
        outputs: OutputModel,
        rng: random.Random,
    ) -> None:
        self.hw, self.prompts, self.outputs, self.rng = hw, prompts, outputs, rng
        self.pod = Pod(0, hw)
        self.next_id = 1
        waiting = int(row["num_request_waiting"])
        pending_tokens = int(row["prefill_tokens_in_flight"])
        pending = waiting + (1 if waiting == 0 and pending_tokens > 0 else 0)
        decoding = max(int(row["num_request_running"]) - pending, 0)
        self._add_decoding(decoding, float(row["kv_cache_percentage"]))
        for _ in range(pending):
            self._add(max(pending_tokens // pending, 1), outputs.draw(rng))

    def _add(self, prompt: int, output: int) -> Seq:
        request = Request(self.next_id, 0.0, prompt, output)
        self.next_id += 1
        return self.pod.submit(request, 0.0)

    def _add_decoding(self, count: int, kv_fraction: float) -> None:
        if count == 0:
            return
        block = self.hw.block_size
        blocks_each = max(round(kv_fraction * self.hw.kv_blocks / count), 1)
        for _ in range(count):
            context = blocks_each * block
            remaining = max(1, round(self.rng.random() * self.outputs.draw(self.rng)))
            seq = self._add(context, remaining + 1)
            self.pod.waiting.pop()
            self.pod.prefill_pending_tokens -= context
            if not self.pod.allocator.allocate(seq, blocks_each):
                break  # a row whose KV exceeds this hardware: keep what fits
            seq.computed = seq.target = context
            seq.generated = 1
            seq.first_token_s = 0.0
            self.pod.running.append(seq)

    def measure(self, prompt: int, output: int) -> Seq:
        """Serve one request on the rebuilt pod; returns it when it finishes (or at the cap)."""
        pod = self.pod
        end = pod.start_step(0.0)
        arrival = self.rng.random() * (end or 0.0)
        target = pod.submit(Request(0, arrival, prompt, output), arrival)
        now = arrival if end is None else end
        while now < MAX_SIM_S:
            if pod.step_end_s is not None:
                _, finished = pod.finish_step(now)
                for seq in finished:
                    if seq is target:
                        return target
                    self._add(self.rng.choice(self.prompts), self.outputs.draw(self.rng))
                if output == 1 and target.first_token_s is not None:
                    return target
            end = pod.start_step(now)
            if end is None:
                break
            now = end
        return target


def simulate_row(
    row: dict[str, float], hw: Hardware, prompts: Sequence[int], outputs: OutputModel, seed: int
) -> float | None:
    """The simulated TTFT (ms) or TPOT (ms) of one trace row, whichever the row measures."""
    rng = random.Random(seed)
    rebuilt = Reconstruction(row, hw, prompts, outputs, rng)
    measures_ttft = row["actual_ttft_ms"] > 0
    output = 1 if measures_ttft else max(2, outputs.draw(rng))
    seq = rebuilt.measure(int(row["input_token_length"]), output)
    arrival = seq.request.arrival_s
    if measures_ttft:
        if seq.first_token_s is None:
            return None
        return (seq.first_token_s - arrival) * 1000.0 + hw.overhead_ms
    if seq.finish_s is None or seq.first_token_s is None:
        return None
    return (seq.finish_s - seq.first_token_s) * 1000.0 / (output - 1)
