"""The rule: does the best predictor policy beat the best heuristic, by more than noise?

- `not-enough-data`: fewer than MIN_ROWS rows or under MIN_MINUTES of traffic (decided
  before anything is simulated; the reason names what is missing).
- TTFT p90: the baseline (heuristic, token-load, round-robin, and when they ran
  token-load-per-class, on a pool mixing hardware classes, and pd-heuristic, on a
  prefill/decode pool) with the lowest mean over the seeds against
  the predictor policy (predicted-latency, latency-first) with the lowest. A win when the
  predictor's mean is lower by more than the seeds' spread (the wider of the two
  policies' max - min) and by at least MIN_TTFT_GAIN (5 %).
- SLO attainment (only with --slo flags): the baseline and the predictor policy with the
  highest mean. A win when the predictor's is higher by at least MIN_SLO_GAIN (1 point)
  and the ranges do not overlap (its worst seed above the baseline's best).
- `enable` when either is a win, else `little-gain` (a tie, or a loss: the expected change
  then says which).
- Confidence `low` when the pod model misses the rows (advisor.fit: a cell of enough rows
  off by more than 25 %) or the output lengths are assumed, else `high`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from advisor.fit import ERROR_LIMIT, FitReport
from advisor.profile import Profile
from advisor.simulate import VERDICT_BASELINES, PolicyRuns, Simulation, is_predictor

MIN_ROWS = 1000
MIN_MINUTES = 10.0
MIN_TTFT_GAIN = 0.05
MIN_SLO_GAIN = 0.01

Answer = Literal["enable", "little-gain", "not-enough-data"]
Confidence = Literal["high", "low"]
Figure = Literal["ttft_p90", "slo_attainment"]


@dataclass(frozen=True)
class Range:
    """One figure over the seeds."""

    mean: float
    low: float
    high: float

    @property
    def spread(self) -> float:
        return self.high - self.low


def over_seeds(values: Sequence[float | None]) -> Range | None:
    known = [v for v in values if v is not None]
    if not known:
        return None
    return Range(sum(known) / len(known), min(known), max(known))


def figure_range(runs: PolicyRuns, figure: Figure) -> Range | None:
    if figure == "ttft_p90":
        return over_seeds([s.ttft_p90_ms for s in runs.seeds])
    return over_seeds([s.slo_attainment for s in runs.seeds])


@dataclass(frozen=True)
class Comparison:
    figure: Figure
    baseline: str
    baseline_range: Range
    predictor: str
    predictor_range: Range
    change: float  # TTFT p90: predictor / baseline - 1; SLO: predictor - baseline (points/100)
    win: bool


@dataclass(frozen=True)
class Verdict:
    answer: Answer
    ttft: Comparison | None
    slo: Comparison | None
    confidence: Confidence
    confidence_reasons: tuple[str, ...]
    missing: tuple[str, ...]  # what not-enough-data lacks


def data_gaps(profile: Profile) -> tuple[str, ...]:
    gaps = []
    if profile.rows < MIN_ROWS:
        gaps.append(f"only {profile.rows:,} rows in the window (need {MIN_ROWS:,})")
    if profile.minutes < MIN_MINUTES:
        minutes = math.floor(profile.minutes * 100) / 100  # 9.996 is not 10
        gaps.append(
            f"only {minutes:g} minutes of traffic between the first and the last row "
            f"(need {MIN_MINUTES:g})"
        )
    return tuple(gaps)


def _best(runs: Sequence[PolicyRuns], figure: Figure, lowest: bool) -> tuple[str, Range] | None:
    ranged = [(r.name, rng) for r in runs if (rng := figure_range(r, figure)) is not None]
    if not ranged:
        return None
    pick = min if lowest else max
    return pick(ranged, key=lambda item: item[1].mean)


def compare(sim: Simulation, figure: Figure) -> Comparison | None:
    lowest = figure == "ttft_p90"
    base = _best([p for p in sim.policies if p.name in VERDICT_BASELINES], figure, lowest)
    pred = _best([p for p in sim.policies if is_predictor(p.name)], figure, lowest)
    if base is None or pred is None:
        return None
    (b_name, b), (p_name, p) = base, pred
    if lowest:
        change = p.mean / b.mean - 1.0 if b.mean > 0 else 0.0
        win = b.mean - p.mean > max(b.spread, p.spread) and change <= -MIN_TTFT_GAIN
    else:
        change = p.mean - b.mean
        win = change >= MIN_SLO_GAIN and p.low > b.high
    return Comparison(figure, b_name, b, p_name, p, change, win)


def confidence(profile: Profile, fit: FitReport | None) -> tuple[Confidence, tuple[str, ...]]:
    reasons = []
    if fit is not None:
        for cell in fit.off:
            of = f"{cell.pod_class} " if cell.pod_class else ""
            reasons.append(
                f"the simulated {of}pod's {cell.target.upper()} median is off by "
                f"{cell.error:+.0%} for prompts {cell.band} ({cell.rows} rows; limit "
                f"{ERROR_LIMIT:.0%})"
            )
    if profile.output_source == "assumed":
        reasons.append("output lengths are assumed: no TPOT row carries num_tokens_generated")
    return ("low" if reasons else "high"), tuple(reasons)


def decide(profile: Profile, fit: FitReport | None, sim: Simulation | None) -> Verdict:
    level, reasons = confidence(profile, fit)
    gaps = data_gaps(profile)
    if gaps or sim is None:
        return Verdict("not-enough-data", None, None, "low", reasons, gaps)
    ttft = compare(sim, "ttft_p90")
    slo = compare(sim, "slo_attainment")
    enable = any(c is not None and c.win for c in (ttft, slo))
    return Verdict("enable" if enable else "little-gain", ttft, slo, level, reasons, ())
