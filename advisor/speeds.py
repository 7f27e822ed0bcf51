"""A hardware class's speed read from its own rows: how much faster or slower its pods are
than the constants it starts from (poolsim.hardware).

Two factors, each multiplying one side of the step-time roofline (poolsim.hardware):
- compute (ms_per_token, ms_per_attn_mtoken), from the class's TTFT rows with no queue
  (num_request_waiting == 0, so the row times its own prefill, not a queue's): each row's
  pod is rebuilt on the current constants (poolsim.reconstruct, as advisor.fit does) and
  serves the row's uncached prompt, input_token_length x (1 - prefix_cache_score); the
  factor is the median over the rows of (measured TTFT - overhead) / (simulated - overhead),
  i.e. of the time per uncached prompt token, measured against simulated;
- memory (step_floor_ms, ms_per_kv_ktoken), from its TPOT rows: the median of measured /
  simulated TPOT.
Medians of per-row ratios, so a few odd rows do not move them. ROUNDS rounds, each from
the constants the one before scaled: a short prefill is bound by the step floor and a
decode step carrying a prefill chunk by compute, so one round leaves a residue the next
takes off. Each factor is clamped to [MIN_SCALE, MAX_SCALE]; one with fewer than MIN_ROWS
rows stays 1. The overhead (API server, tokenisation) is the base's and is not scaled.
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from advisor.fit import SAMPLE_SEED, trace_rows
from advisor.rows import StoreRows
from poolsim.hardware import Hardware
from poolsim.reconstruct import OutputModel, simulate_row

ROUNDS = 2
ESTIMATE_ROWS = 120  # per target and class, a fixed random sample
MIN_ROWS = 10
MIN_SCALE, MAX_SCALE = 0.25, 4.0
MIN_PREFILL_MS = 1.0  # a simulated TTFT this close to the overhead says nothing of speed


@dataclass(frozen=True)
class Speeds:
    """Factors on the base class's constants (< 1: faster than the base)."""

    compute: float
    memory: float
    ttft_rows: int  # rows the compute factor was read from (0: not estimated)
    tpot_rows: int  # rows the memory factor was read from


UNSCALED = Speeds(1.0, 1.0, 0, 0)


def scaled(base: Hardware, speeds: Speeds, name: str) -> Hardware:
    """`base` with its compute and memory constants scaled, named `name`."""
    return replace(
        base,
        name=name,
        ms_per_token=base.ms_per_token * speeds.compute,
        ms_per_attn_mtoken=base.ms_per_attn_mtoken * speeds.compute,
        step_floor_ms=base.step_floor_ms * speeds.memory,
        ms_per_kv_ktoken=base.ms_per_kv_ktoken * speeds.memory,
    )


def _sample(rows: StoreRows, keep: np.ndarray, seed: int, uncached: bool) -> list[dict[str, float]]:
    """At most ESTIMATE_ROWS of the rows `keep` marks (measuring rows, prompts >= 1), in the
    traces' shape; with `uncached`, each prompt cut to the part its pod did not cache."""
    picked = trace_rows(rows.subset(keep))  # keeps every row: `keep` is that filter already
    scores = rows.prefix_score[keep]
    chosen: Sequence[int] = range(len(picked))
    if len(picked) > ESTIMATE_ROWS:
        chosen = sorted(random.Random(seed).sample(chosen, ESTIMATE_ROWS))
    if not uncached:
        return [picked[i] for i in chosen]
    return [
        {
            **picked[i],
            "input_token_length": max(
                1.0, round(picked[i]["input_token_length"] * (1.0 - float(scores[i])))
            ),
        }
        for i in chosen
    ]


def _ttft_ratio(
    rows: list[dict[str, float]], hw: Hardware, prompts: list[int], outputs: OutputModel
) -> float | None:
    ratios = []
    for index, row in enumerate(rows):
        simulated = simulate_row(row, hw, prompts, outputs, SAMPLE_SEED + index)
        if simulated is None or simulated - hw.overhead_ms < MIN_PREFILL_MS:
            continue
        measured = max(row["actual_ttft_ms"] - hw.overhead_ms, 0.0)
        ratios.append(measured / (simulated - hw.overhead_ms))
    return statistics.median(ratios) if len(ratios) >= MIN_ROWS else None


def _tpot_ratio(
    rows: list[dict[str, float]], hw: Hardware, prompts: list[int], outputs: OutputModel
) -> float | None:
    ratios = []
    for index, row in enumerate(rows):
        simulated = simulate_row(row, hw, prompts, outputs, SAMPLE_SEED + index)
        if simulated is not None and simulated > 0:
            ratios.append(row["actual_tpot_ms"] / simulated)
    return statistics.median(ratios) if len(ratios) >= MIN_ROWS else None


def _clamp(value: float) -> float:
    return min(max(value, MIN_SCALE), MAX_SCALE)


def estimate(rows: StoreRows, base: Hardware, outputs: OutputModel) -> Speeds:
    """One class's factors on `base`, from that class's rows (see the module docstring)."""
    sized = rows.input_tokens >= 1
    ttft = _sample(rows, rows.measures_ttft & (rows.waiting == 0) & sized, SAMPLE_SEED, True)
    tpot = _sample(rows, rows.measures_tpot & sized, SAMPLE_SEED + 1, False)
    # the background the rebuilt pods serve: prompts as uncached as the measured ones
    prompts = [int(r["input_token_length"]) for r in ttft or tpot] or [1]
    speeds = UNSCALED
    for _ in range(ROUNDS):
        hw = scaled(base, speeds, base.name)
        t = _ttft_ratio(ttft, hw, prompts, outputs)
        m = _tpot_ratio(tpot, hw, prompts, outputs)
        speeds = Speeds(
            speeds.compute if t is None else _clamp(speeds.compute * t),
            speeds.memory if m is None else _clamp(speeds.memory * m),
            0 if t is None else len(ttft),
            0 if m is None else len(tpot),
        )
    return speeds
