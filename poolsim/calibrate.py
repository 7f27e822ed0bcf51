"""Calibration of a hardware class against recorded traces (run once; constants fixed after).

Each trace row gives one pod's state when a request was dispatched (KV usage, waiting
requests, the picker's in-flight count, prompt tokens still to prefill) and what that
request then measured (TTFT or TPOT). For each row we rebuild that state on a simulated
pod and serve the same request on it:

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

The simulated TTFT (TTFT rows) or TPOT (TPOT rows, an output length drawn from the output
model) is compared with the recorded one by medians, per trace and per prompt-length band.
`fit` searches the constants on a fixed subsample of rows; `report` checks them on all
rows. Outputs of the traces are not recorded (the specs give 1..1024 tokens); the output
model is an assumption stated in `OUTPUTS`.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from poolsim.hardware import Hardware
from poolsim.pod import Pod
from poolsim.request import Request
from poolsim.sequence import Seq

TRACE_DIR = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces"
TRACES = ("sharegpt-h200", "chatbot-synthetic-h200")
BANDS = (0, 128, 512, 2048, 8192, 1 << 20)
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
            if not self.pod.pool.allocate(seq, blocks_each):
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


@dataclass(frozen=True, slots=True)
class BandFit:
    trace: str
    target: str  # "ttft" or "tpot"
    band: str
    rows: int
    recorded_median: float
    simulated_median: float

    @property
    def ratio(self) -> float:
        return self.simulated_median / self.recorded_median


def band_name(tokens: int) -> str:
    for low, high in pairwise(BANDS):
        if low <= tokens < high:
            return f"{low}-{high - 1}" if high < 1 << 20 else f">={low}"
    return "?"


def compare(
    trace: str, rows: Sequence[dict[str, float]], hw: Hardware, seed: int = 0
) -> list[BandFit]:
    """Medians per (target, band) and overall ('all'), recorded vs simulated."""
    prompts = [int(r["input_token_length"]) for r in rows]
    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for index, row in enumerate(rows):
        target = "ttft" if row["actual_ttft_ms"] > 0 else "tpot"
        simulated = simulate_row(row, hw, prompts, OUTPUTS[trace], seed * 1_000_003 + index)
        if simulated is None:
            continue
        recorded = float(row[f"actual_{target}_ms"])
        for band in ("all", band_name(int(row["input_token_length"]))):
            got = groups.setdefault((target, band), ([], []))
            got[0].append(recorded)
            got[1].append(simulated)
    order = {band_name(low): index for index, low in enumerate(BANDS)} | {"all": len(BANDS)}
    return [
        BandFit(trace, target, band, len(rec), statistics.median(rec), statistics.median(sim))
        for (target, band), (rec, sim) in sorted(groups.items(),
                                                 key=lambda kv: (kv[0][0], order[kv[0][1]]))
    ]


MIN_BAND_ROWS = 10
# the starting guess: an H200 reading Qwen3-32B's bf16 weights (~66 GB at 4.8 TB/s ~ 14 ms,
# plus launch overheads), ~8k prefill tokens/s, vLLM's 512-token budget, ~430k KV tokens
START = Hardware(name="h200", step_floor_ms=18.0, ms_per_token=0.12, ms_per_kv_ktoken=0.08,
                 ms_per_attn_mtoken=4.0, overhead_ms=20.0, kv_blocks=27_000,
                 max_batched_tokens=512)
GRID: dict[str, tuple[float, ...]] = {
    "ms_per_token": (0.10, 0.12, 0.14, 0.16),
    "max_batched_tokens": (256, 384, 512),
    "ms_per_kv_ktoken": (0.02, 0.04, 0.06, 0.08),
    "kv_blocks": (13_500, 27_000, 40_000),
    "step_floor_ms": (17.0, 18.0, 19.0),
    "overhead_ms": (10.0, 20.0, 30.0),
}
FINE_GRID: dict[str, tuple[float, ...]] = {
    "overhead_ms": (25.0, 30.0, 35.0, 40.0),
    "ms_per_token": (0.11, 0.12, 0.13),
    "max_batched_tokens": (352, 384, 416),
    "step_floor_ms": (17.5, 18.0, 18.5),
    "kv_blocks": (11_000, 13_500, 16_000),
}


def sample_rows(rows: Sequence[dict[str, float]], count: int, seed: int) -> list[dict[str, float]]:
    """A fixed random subsample (the fit's rows; the check uses every row)."""
    if count >= len(rows):
        return list(rows)
    return random.Random(seed).sample(list(rows), count)


def loss(fits: Sequence[BandFit]) -> float:
    """Squared log ratio of the medians, over bands with enough rows; 'all' counts double."""
    total = 0.0
    for fit in fits:
        if fit.rows >= MIN_BAND_ROWS:
            total += (2.0 if fit.band == "all" else 1.0) * math.log(fit.ratio) ** 2
    return total


def evaluate(hw: Hardware, samples: dict[str, list[dict[str, float]]]) -> list[BandFit]:
    return [fit for trace, rows in samples.items() for fit in compare(trace, rows, hw)]


def fit(
    start: Hardware, samples: dict[str, list[dict[str, float]]], rounds: int = 2, log: bool = True
) -> Hardware:
    """Coordinate descent over GRID from `start`, one constant at a time."""
    from dataclasses import replace

    best, best_loss = start, loss(evaluate(start, samples))
    for _ in range(rounds):
        for name, values in GRID.items():
            for value in values:
                typed = int(value) if name in ("max_batched_tokens", "kv_blocks") else value
                candidate = replace(best, **{name: typed})  # type: ignore[arg-type]
                if candidate == best:
                    continue
                score = loss(evaluate(candidate, samples))
                if log:
                    print(f"{name}={typed}: loss {score:.4f} (best {best_loss:.4f})")  # noqa: T201
                if score < best_loss:
                    best, best_loss = candidate, score
    return best


def table(fits: Sequence[BandFit]) -> str:
    lines = [
        "| trace | target | prompt band | rows | recorded median ms | simulated median ms"
        " | ratio | within 15 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for f in fits:
        mark = (
            "yes"
            if abs(f.ratio - 1) <= 0.15
            else ("no" if f.rows >= MIN_BAND_ROWS else f"no (< {MIN_BAND_ROWS} rows)")
        )
        lines.append(
            f"| {f.trace} | {f.target} | {f.band} | {f.rows} | "
            f"{f.recorded_median:,.1f} | {f.simulated_median:,.1f} | {f.ratio:.2f} | "
            f"{mark} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Check a hardware class against every trace row (or --fit from it on a subsample)."""
    import argparse

    from poolsim.hardware import hardware

    parser = argparse.ArgumentParser(prog="python -m poolsim.calibrate", description=main.__doc__)
    parser.add_argument("--hardware", default="h200")
    parser.add_argument("--rows", type=int, default=0, help="rows per trace (0: all)")
    parser.add_argument("--fit", action="store_true", help="search the constants (GRID)")
    parser.add_argument("--fit-rows", type=int, default=90, help="rows per trace for --fit")
    parser.add_argument("--trace-dir", type=Path, default=TRACE_DIR)
    args = parser.parse_args(argv)
    hw = hardware(args.hardware)
    rows = {trace: load_rows(trace, args.trace_dir) for trace in TRACES}
    if args.fit:
        samples = {t: sample_rows(r, args.fit_rows, seed=7) for t, r in rows.items()}
        hw = fit(START, samples)
        print(hw)  # noqa: T201
    checked = {t: sample_rows(r, args.rows, seed=11) if args.rows else r for t, r in rows.items()}
    fits = evaluate(hw, checked)
    print(table(fits))  # noqa: T201
    print(f"loss {loss(fits):.4f}")  # noqa: T201


if __name__ == "__main__":
    main()
