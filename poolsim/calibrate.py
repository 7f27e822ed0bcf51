"""Calibration of a hardware class against the recorded traces (run once; fixed after).

For every trace row `reconstruct.simulate_row` serves the row's request on its rebuilt pod;
the simulated TTFT (TTFT rows) or TPOT (TPOT rows) is compared with the recorded one by
medians, per trace, target and prompt-length band (`compare`). `fit` searches the
constants by coordinate descent (two rounds over GRID, one over FINE_GRID, from START) on
a fixed subsample of rows; `main` checks a class on every row and prints the table.

    python -m poolsim.calibrate [--fit] [--rows N]
"""

from __future__ import annotations

import math
import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from poolsim.hardware import Hardware
from poolsim.reconstruct import (
    OUTPUTS,
    TRACE_DIR,
    TRACES,
    OutputModel,
    load_rows,
    simulate_row,
)

__all__ = ["OUTPUTS", "TRACES", "load_rows", "simulate_row"]

BANDS = (0, 128, 512, 2048, 8192, 1 << 20)


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
    trace: str,
    rows: Sequence[dict[str, float]],
    hw: Hardware,
    seed: int = 0,
    outputs: OutputModel | None = None,
) -> list[BandFit]:
    """Medians per (target, band) and overall ('all'), recorded vs simulated. `outputs`:
    the output model of rows from elsewhere than the traces (default: the trace's)."""
    prompts = [int(r["input_token_length"]) for r in rows]
    output_model = OUTPUTS[trace] if outputs is None else outputs
    groups: dict[tuple[str, str], tuple[list[float], list[float]]] = {}
    for index, row in enumerate(rows):
        target = "ttft" if row["actual_ttft_ms"] > 0 else "tpot"
        simulated = simulate_row(row, hw, prompts, output_model, seed * 1_000_003 + index)
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
        for (target, band), (rec, sim) in sorted(
            groups.items(), key=lambda kv: (kv[0][0], order[kv[0][1]])
        )
    ]


MIN_BAND_ROWS = 10
# the starting guess: an H200 reading Qwen3-32B's bf16 weights (~66 GB at 4.8 TB/s ~ 14 ms,
# plus launch overheads), ~8k prefill tokens/s, vLLM's 512-token budget, ~430k KV tokens
START = Hardware(
    name="h200",
    step_floor_ms=18.0,
    ms_per_token=0.12,
    ms_per_kv_ktoken=0.08,
    ms_per_attn_mtoken=4.0,
    overhead_ms=20.0,
    kv_blocks=27_000,
    max_batched_tokens=512,
)
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


def evaluate(
    hw: Hardware, samples: dict[str, list[dict[str, float]]], seed: int = 0
) -> list[BandFit]:
    return [fit for trace, rows in samples.items() for fit in compare(trace, rows, hw, seed)]


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
    parser.add_argument("--seed", type=int, default=0, help="the rebuilds' random draws (0)")
    args = parser.parse_args(argv)
    hw = hardware(args.hardware)
    rows = {trace: load_rows(trace, args.trace_dir) for trace in TRACES}
    if args.fit:
        samples = {t: sample_rows(r, args.fit_rows, seed=7) for t, r in rows.items()}
        hw = fit(START, samples)
        print(hw)  # noqa: T201
    checked = {t: sample_rows(r, args.rows, seed=11) if args.rows else r for t, r in rows.items()}
    fits = evaluate(hw, checked, args.seed)
    print(table(fits))  # noqa: T201
    print(f"loss {loss(fits):.4f}")  # noqa: T201


if __name__ == "__main__":
    main()
