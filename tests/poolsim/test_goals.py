"""The routing goal's verdicts (benchmarks.poolsim_goals) on hand-made run documents."""

from __future__ import annotations

from typing import Any

from benchmarks.poolsim_goals import goal_check


def policy(p90: float, slo: float, p50: float = 100.0, first: float = 300.0) -> dict[str, Any]:
    return {
        "ttft_ms": {"p50": p50, "p90": p90, "p99": p90 * 2},
        "slo_attainment": slo,
        "ttft_ms_per_minute": [{"p50": p50, "p90": first, "p99": first}],
        "pod_share": [0.3, 0.3, 0.4],
        "prefix_hit_rate": [None, 0.0, 0.0],
    }


def docs(ours: list[float], best: list[float], oracle: list[float]) -> list[dict[str, Any]]:
    """Three seeds; TTFT p90 per seed for latency-first, token-load (the best baseline),
    and the oracle; round-robin far behind; SLO attainment mirrors the p90s."""
    out = []
    for o, b, w in zip(ours, best, oracle, strict=True):
        out.append(
            {
                "policies": {
                    "round-robin": policy(900.0, 0.5),
                    "token-load": policy(b, 1 - b / 10_000),
                    "latency-first": policy(o, 1 - o / 10_000, p50=105.0, first=380.0),
                    "oracle": policy(w, 1 - w / 10_000),
                }
            }
        )
    return out


def test_a_clear_win_closes_its_share_of_the_gap() -> None:
    text = goal_check(docs([150, 155, 160], [200, 205, 210], [100, 105, 110]))
    assert text is not None
    p90 = text.splitlines()[0]
    # means: ours 155, best 205, oracle 105 -> 50 of the 100 ms gap closed
    assert "best baseline token-load" in p90 and "WIN" in p90 and "closes 50% of the gap" in p90
    assert "WIN" in text.splitlines()[1]  # SLO attainment follows the p90s here
    # p50 105 vs 100: +5 %; first minute 380 vs 300: +27 %; shares 0.9x fair
    assert "+5% (goal <= +10%)" in text and "+27% (goal <= +20%)" in text
    assert "0.90x the fair share" in text


def test_overlapping_seeds_are_a_tie_allowed_only_where_the_oracle_ties_too() -> None:
    tie = goal_check(docs([195, 205, 215], [200, 205, 210], [100, 105, 110]))
    assert tie is not None and "tie, not allowed;" in tie.splitlines()[0]
    allowed = goal_check(docs([195, 205, 215], [200, 205, 210], [198, 204, 212]))
    assert allowed is not None and "tie, allowed (the oracle ties too)" in allowed.splitlines()[0]
    loss = goal_check(docs([300, 310, 320], [200, 205, 210], [100, 105, 110]))
    assert loss is not None and "LOSS" in loss.splitlines()[0]


def test_no_verdict_without_latency_first_or_the_oracle() -> None:
    runs = docs([1, 1, 1], [2, 2, 2], [0.5, 0.5, 0.5])
    for doc in runs:
        del doc["policies"]["oracle"]
    assert goal_check(runs) is None


def test_summary_has_a_line_per_workload_with_both_verdicts() -> None:
    from benchmarks.poolsim_goals import summary_table

    runs = {
        "mixed": docs([150, 155, 160], [200, 205, 210], [100, 105, 110]),
        "chat": docs([300, 310, 320], [200, 205, 210], [100, 105, 110]),
    }
    lines = summary_table(runs).splitlines()[2:]
    assert lines[0].startswith("| mixed | token-load | 205 (200-210) | 155 (150-160) |")
    assert lines[0].endswith("| WIN / WIN |") and lines[1].endswith("| LOSS / LOSS |")


def test_token_load_per_class_counts_as_a_baseline_and_shares_are_judged_per_class() -> None:
    """On a mixed pool the per-class token-load is the baseline to beat when it is best, and
    the fair-share line compares each pod with its own class's pods."""
    runs = docs([150, 155, 160], [200, 205, 210], [100, 105, 110])
    for doc in runs:
        doc["policies"]["token-load-per-class"] = policy(120.0, 0.999)
        doc["pod_classes"] = ["h200", "h200", "b200"]
        doc["policies"]["latency-first"]["pod_share"] = [0.05, 0.15, 0.8]
    text = goal_check(runs)
    assert text is not None
    assert "best baseline token-load-per-class" in text.splitlines()[0]
    assert "LOSS" in text.splitlines()[0]
    # h200 pods 0.05 and 0.15 (their mean 0.10): the lowest is 0.5x; b200 alone 1.0x
    assert "0.50x that class's mean" in text
