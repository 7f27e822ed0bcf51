"""The verdict rule on hand-made figures (advisor.verdict's docstring states it)."""

from __future__ import annotations

import numpy as np
import pytest

from advisor.fit import FitCell, FitReport
from advisor.profile import Profile, profile
from advisor.reason import explain
from advisor.rows import StoreRows
from advisor.simulate import PolicyRuns, SeedFigures, Simulation
from advisor.verdict import compare, decide


def runs(name: str, ttft_p90: list[float], slo: list[float] | None = None) -> PolicyRuns:
    slos = slo or [None] * len(ttft_p90)  # type: ignore[list-item]
    seeds = tuple(
        SeedFigures(seed, 1000, 0, p90 / 2, p90, 30.0, s, 1.0)
        for seed, (p90, s) in enumerate(zip(ttft_p90, slos, strict=True))
    )
    return PolicyRuns(name, seeds, ())


def simulation(*policies: PolicyRuns) -> Simulation:
    return Simulation(policies, (1200,), 0, 1.0)


def traffic(rows: int = 2000, minutes: float = 30.0) -> Profile:
    """Rows alternating TTFT and TPOT (with output lengths) over `minutes`."""
    index = np.arange(rows, dtype=np.float64)
    ttft = index % 2 == 0
    return profile(
        StoreRows(
            timestamp_s=index * minutes * 60.0 / max(rows - 1, 1),
            input_tokens=100.0 + index % 500,
            tokens_generated=np.where(ttft, 1.0, 50.0 + index % 200),
            waiting=index % 3,
            running=index % 8,
            kv_cache=(index % 10) / 10.0,
            prefix_score=np.zeros(rows),
            prefill_in_flight=np.zeros(rows),
            ttft_ms=np.where(ttft, 100.0, 0.0),
            tpot_ms=np.where(ttft, 0.0, 20.0),
        )
    )


BASELINES = (runs("heuristic", [150, 155, 160]), runs("round-robin", [170, 171, 175]))


def test_a_clear_ttft_gain_enables() -> None:
    sim = simulation(
        *BASELINES,
        runs("token-load", [100, 102, 104]),
        runs("latency-first", [90, 91, 92]),
        runs("oracle", [80, 80, 80]),
    )
    verdict = decide(traffic(), None, sim)
    assert verdict.answer == "enable" and verdict.confidence == "high"
    assert verdict.ttft is not None
    assert (verdict.ttft.baseline, verdict.ttft.predictor) == ("token-load", "latency-first")
    assert verdict.ttft.change == pytest.approx(91 / 102 - 1)


@pytest.mark.parametrize(
    ("baseline", "predictor"),
    [
        ([100, 80, 120], [90, 92, 94]),  # 8 % faster but within the baseline's 40 ms spread
        ([100, 100, 100], [97, 97, 97]),  # beyond the spread but only 3 % faster
        ([100, 101, 102], [120, 121, 122]),  # slower
    ],
)
def test_no_clear_ttft_gain_is_little_gain(baseline: list[float], predictor: list[float]) -> None:
    sim = simulation(runs("token-load", baseline), runs("predicted-latency", predictor))
    verdict = decide(traffic(), None, sim)
    assert verdict.answer == "little-gain" and verdict.ttft is not None
    assert not verdict.ttft.win


def test_the_best_of_each_side_is_compared() -> None:
    sim = simulation(
        *BASELINES,
        runs("predicted-latency", [140, 141, 142]),
        runs("latency-first", [120, 121, 122]),
    )
    comparison = compare(sim, "ttft_p90")
    assert comparison is not None
    assert (comparison.baseline, comparison.predictor) == ("heuristic", "latency-first")
    assert comparison.win  # 121 against 155: -22 %, beyond the 10 ms spread


def test_slo_attainment_higher_with_separate_ranges_enables() -> None:
    sim = simulation(
        runs("token-load", [100, 100], slo=[0.90, 0.91]),
        runs("latency-first", [100, 100], slo=[0.93, 0.94]),
    )
    verdict = decide(traffic(), None, sim)
    assert verdict.answer == "enable" and verdict.slo is not None and verdict.slo.win
    assert verdict.slo.change == pytest.approx(0.03)
    assert verdict.ttft is not None and not verdict.ttft.win


def test_slo_ranges_that_overlap_are_little_gain() -> None:
    sim = simulation(
        runs("token-load", [100, 100], slo=[0.90, 0.95]),
        runs("latency-first", [100, 100], slo=[0.93, 0.96]),
    )
    assert decide(traffic(), None, sim).answer == "little-gain"


def test_too_few_rows_or_minutes_is_not_enough_data() -> None:
    sim = simulation(runs("token-load", [100]), runs("latency-first", [50]))
    short = decide(traffic(rows=5000, minutes=9.5), None, sim)
    assert short.answer == "not-enough-data"
    assert short.missing == (
        "only 9.5 minutes of traffic between the first and the last row (need 10)",
    )
    few = decide(traffic(rows=999), None, None)
    assert few.missing == ("only 999 rows in the window (need 1,000)",)


def test_a_pod_model_off_by_more_than_25_percent_lowers_confidence() -> None:
    sim = simulation(runs("token-load", [100]), runs("latency-first", [50]))
    cells = (FitCell("ttft", "all", 40, 100.0, 130.0), FitCell("tpot", "0-127", 9, 10.0, 20.0))
    verdict = decide(traffic(), FitReport("h200", 80, cells), sim)
    assert verdict.answer == "enable" and verdict.confidence == "low"
    assert len(verdict.confidence_reasons) == 1  # the 9-row cell is not judged
    assert "+30%" in verdict.confidence_reasons[0]
    fine = (FitCell("ttft", "all", 40, 100.0, 124.0),)
    assert decide(traffic(), FitReport("h200", 40, fine), sim).confidence == "high"


def test_the_reason_names_the_gain_and_the_room_left() -> None:
    sim = simulation(
        *BASELINES,
        runs("token-load", [100, 102, 104]),
        runs("latency-first", [90, 91, 92]),
        runs("oracle", [80, 80, 80]),
    )
    profile_ = traffic()
    reason = explain(profile_, decide(profile_, None, sim), sim)
    assert reason.startswith("Prompt sizes vary 2x between p50 (349) and p99 (594 tokens")
    assert "latency-first cuts TTFT p90 by 11% against the best heuristic, token-load" in reason
    assert "the oracle's TTFT p90 is 22% below the best heuristic's" in reason
    tie = simulation(
        runs("token-load", [100, 100]), runs("latency-first", [99, 99]), runs("oracle", [98, 98])
    )
    reason = explain(profile_, decide(profile_, None, tie), tie)
    assert "latency-first is only 1.0% faster on TTFT p90 than token-load" in reason
    assert "already within 2% of the oracle's TTFT p90" in reason
