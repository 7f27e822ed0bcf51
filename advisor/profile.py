"""The traffic the rows record: sizes, prefix reuse, arrival rate, load.

What each figure is read from:
- requests: the rows measuring TTFT (the EPP sends one per request); a store with none
  counts its TPOT rows instead;
- input tokens: `input_token_length` of those request rows;
- output tokens: `num_tokens_generated` of the TPOT rows that carry more than one token
  (the tokens generated when TPOT was measured: the request's whole output as
  latency_client and poolsim send it, a lower bound where an EPP samples TPOT
  mid-stream). With fewer than MIN_OUTPUT_ROWS such rows (the shipped H200 traces record
  0 for every row) the output lengths are an assumption, ASSUMED_OUTPUT, and say so;
- prefix reuse: `prefix_cache_score` of the request rows (the share of the prompt the
  chosen pod had cached), reuse where it is at least REUSE_SCORE;
- arrival rate: request rows per minute of `timestamp`, from the first row to the last
  (a last partial minute counts at its own length);
- load: `num_request_waiting`, `num_request_running` and `kv_cache_percentage` of every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from advisor.rows import StoreRows
from poolsim.reconstruct import OutputModel

MIN_OUTPUT_ROWS = 50
REUSE_SCORE = 0.05  # a prefix score below this is a block or two by chance, not reuse
# The simulator's calibration assumes this for the ShareGPT trace, which records no output
# lengths (poolsim/reconstruct.py, OUTPUTS).
ASSUMED_OUTPUT = OutputModel(median=200, sigma=1.0)
MIN_PARTIAL_MINUTE_S = 10.0  # a shorter tail of the last minute joins the minute before

OutputSource = Literal["tpot rows", "assumed"]


@dataclass(frozen=True)
class Spread:
    """Quantiles, mean and coefficient of variation of one distribution (0s when empty)."""

    count: int
    p50: float
    p90: float
    p99: float
    mean: float
    cv: float

    @property
    def p99_over_p50(self) -> float:
        return self.p99 / self.p50 if self.p50 > 0 else 0.0


def spread(values: np.ndarray) -> Spread:
    if len(values) == 0:
        return Spread(0, 0.0, 0.0, 0.0, 0.0, 0.0)
    p50, p90, p99 = (float(v) for v in np.percentile(values, [50, 90, 99]))
    mean = float(np.mean(values))
    cv = float(np.std(values)) / mean if mean > 0 else 0.0
    return Spread(len(values), p50, p90, p99, mean, cv)


@dataclass(frozen=True)
class RateCurve:
    """Requests per minute, one value per minute of traffic (oldest first)."""

    per_minute: tuple[float, ...]
    mean: float
    p50: float
    peak: float

    @property
    def per_second(self) -> float:
        return self.mean / 60.0


@dataclass(frozen=True)
class Prefix:
    reused_share: float  # of the requests, those with a prefix score >= REUSE_SCORE
    scores: Spread  # of those


@dataclass(frozen=True)
class Load:
    waiting: Spread
    running: Spread
    kv_cache: Spread
    queued_share: float  # rows with a request waiting on the pod


@dataclass(frozen=True)
class Profile:
    rows: int
    request_rows: int
    tpot_rows: int
    minutes: float
    input_tokens: Spread
    output_tokens: Spread
    output_source: OutputSource
    prefix: Prefix
    rate: RateCurve
    load: Load


def request_mask(rows: StoreRows) -> np.ndarray:
    """The rows standing for one request each (see the module docstring)."""
    ttft = rows.measures_ttft
    return ttft if ttft.any() else rows.measures_tpot


def output_tokens(rows: StoreRows) -> np.ndarray:
    """Output lengths read from TPOT rows, or an empty array when too few carry one."""
    tokens = rows.tokens_generated[rows.measures_tpot & (rows.tokens_generated > 1)]
    return tokens if len(tokens) >= MIN_OUTPUT_ROWS else np.empty(0)


def output_model(rows: StoreRows) -> OutputModel:
    """A lognormal fitted to the output lengths (median, sigma from the p50-p90 gap),
    capped at their p99 x 2; the assumption when the rows carry none."""
    tokens = output_tokens(rows)
    if len(tokens) == 0:
        return ASSUMED_OUTPUT
    p50, p90, p99 = np.percentile(tokens, [50, 90, 99])
    sigma = float(np.log(max(p90, p50) / max(p50, 1.0))) / 1.2816
    return OutputModel(median=float(max(p50, 1.0)), sigma=sigma, cap=max(2, int(p99 * 2)))


def rate_curve(times: np.ndarray) -> RateCurve:
    if len(times) == 0:
        return RateCurve((), 0.0, 0.0, 0.0)
    first, last = float(times[0]), float(times[-1])
    edges = [*np.arange(first, last, 60.0).tolist(), last + 1e-6]
    if len(edges) > 2 and edges[-1] - edges[-2] < MIN_PARTIAL_MINUTE_S:
        del edges[-2]
    counts, _ = np.histogram(times, bins=np.asarray(edges))
    widths = np.maximum(np.diff(edges), 1e-6)
    rates = counts / widths * 60.0
    if last - first < MIN_PARTIAL_MINUTE_S:  # a burst: no rate to speak of
        rates = np.asarray([float(len(times))])
    return RateCurve(
        tuple(float(r) for r in rates),
        float(len(times) / max(last - first, 60.0) * 60.0),
        float(np.median(rates)),
        float(np.max(rates)),
    )


def profile(rows: StoreRows) -> Profile:
    requests = request_mask(rows)
    outputs = output_tokens(rows)
    scores = rows.prefix_score[requests]
    reused = scores[scores >= REUSE_SCORE]
    times = rows.timestamp_s
    minutes = float(times[-1] - times[0]) / 60.0 if len(times) else 0.0
    return Profile(
        rows=len(rows),
        request_rows=int(requests.sum()),
        tpot_rows=int(rows.measures_tpot.sum()),
        minutes=minutes,
        input_tokens=spread(rows.input_tokens[requests]),
        output_tokens=spread(outputs if len(outputs) else np.empty(0)),
        output_source="tpot rows" if len(outputs) else "assumed",
        prefix=Prefix(len(reused) / max(len(scores), 1), spread(reused)),
        rate=rate_curve(times[requests]),
        load=Load(
            waiting=spread(rows.waiting),
            running=spread(rows.running),
            kv_cache=spread(rows.kv_cache),
            queued_share=float(np.mean(rows.waiting > 0)) if len(rows) else 0.0,
        ),
    )
