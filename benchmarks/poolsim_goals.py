"""The routing goal, checked on the JSON of `latency-predictor simulate` runs (one per seed):
`latency-first` against the best of the heuristics an operator already has.

- TTFT p90 and SLO attainment: a win needs the mean better than every baseline's; where the
  seeds' ranges of ours and of the best baseline overlap it is a tie, allowed only where the
  oracle's range also overlaps the best baseline's (nothing to gain there).
- The share of the gap between the best baseline and the oracle that it closes.
- TTFT p50 not above the lowest baseline p50 by more than 10 %; the first minute's TTFT p90
  not above the lowest baseline's by more than 20 %.
- Pod share: the lowest per-pod share against the fair share (goal >= 0.5x on chat and ramp);
  the lowest per-pod prefix hit rate beside the mean, where there are prefixes.
"""

from __future__ import annotations

import statistics

from benchmarks.poolsim_tables import Doc, mean, values

BASELINES = ("round-robin", "least-requests", "heuristic", "token-load", "token-load-per-class")
OURS = "latency-first"
FAIR_SHARE_GOAL = 0.5
P50_SLACK = 0.10
FIRST_MINUTE_SLACK = 0.20


def _fmt(slo: bool, value: float) -> str:
    return f"{value:.1%}" if slo else f"{value:,.0f} ms"


def _overlap(a: list[float], b: list[float]) -> bool:
    return not (max(a) < min(b) or min(a) > max(b))


def _judge(docs: list[Doc], path: tuple[str, ...], lower: bool) -> tuple[str, str, str]:
    """(best baseline, verdict, share of the gap to the oracle closed) for one figure."""
    present = [p for p in BASELINES if p in docs[0]["policies"]]
    base = {p: mean(docs, p, *path) for p in present}
    best = (min if lower else max)(base, key=lambda p: base[p])
    ours, oracle = mean(docs, OURS, *path), mean(docs, "oracle", *path)
    best_s = values(docs, best, *path)
    better = all((ours < v) if lower else (ours > v) for v in base.values())
    if _overlap(values(docs, OURS, *path), best_s):
        allowed = _overlap(values(docs, "oracle", *path), best_s)
        verdict = "tie, allowed (the oracle ties too)" if allowed else "tie, not allowed"
    else:
        verdict = "WIN" if better else "LOSS"
    gap = oracle - base[best]
    closed = f"{(ours - base[best]) / gap:.0%}" if abs(gap) > 1e-9 else "-"
    return best, verdict, closed


def _headline(docs: list[Doc], label: str, path: tuple[str, ...], lower: bool) -> str:
    best, verdict, closed = _judge(docs, path, lower)
    slo = label.startswith("SLO")
    ours_s, best_s = values(docs, OURS, *path), values(docs, best, *path)
    return (
        f"- {label}: {OURS} {_fmt(slo, mean(docs, OURS, *path))} ({_fmt(slo, min(ours_s))}-"
        f"{_fmt(slo, max(ours_s))}), best baseline {best} {_fmt(slo, mean(docs, best, *path))} "
        f"({_fmt(slo, min(best_s))}-{_fmt(slo, max(best_s))}), oracle "
        f"{_fmt(slo, mean(docs, 'oracle', *path))}: {verdict}; closes {closed} of the gap"
    )


def _first_minute_p90(docs: list[Doc], policy: str) -> float:
    return statistics.mean(
        float(doc["policies"][policy]["ttft_ms_per_minute"][0]["p90"]) for doc in docs
    )


def _secondary(docs: list[Doc]) -> list[str]:
    present = [p for p in BASELINES if p in docs[0]["policies"]]
    p50s = {p: mean(docs, p, "ttft_ms", "p50") for p in present}
    low = min(p50s, key=lambda p: p50s[p])
    ours_p50 = mean(docs, OURS, "ttft_ms", "p50")
    firsts = {p: _first_minute_p90(docs, p) for p in present}
    first_low = min(firsts, key=lambda p: firsts[p])
    ours_first = _first_minute_p90(docs, OURS)
    pods = len(docs[0]["policies"][OURS]["pod_share"])
    lowest_share = min(s for d in docs for s in d["policies"][OURS]["pod_share"]) * pods
    hits = [h for d in docs for h in d["policies"][OURS]["prefix_hit_rate"] if h is not None]
    lines = [
        f"- TTFT p50: {ours_p50:,.0f} ms vs the lowest baseline's ({low}) {p50s[low]:,.0f} ms: "
        f"{ours_p50 / p50s[low] - 1:+.0%} (goal <= +{P50_SLACK:.0%})",
        f"- first minute TTFT p90: {ours_first:,.0f} ms vs the lowest baseline's ({first_low}) "
        f"{firsts[first_low]:,.0f} ms: {ours_first / firsts[first_low] - 1:+.0%} "
        f"(goal <= +{FIRST_MINUTE_SLACK:.0%})",
        f"- lowest pod share: {lowest_share:.2f}x the fair share (goal >= {FAIR_SHARE_GOAL}x "
        "on chat and ramp)",
    ]
    within = lowest_within_class(docs)
    if within is not None:
        lines.append(
            f"- lowest pod share within its hardware class: {within:.2f}x that class's mean "
            f"(goal >= {FAIR_SHARE_GOAL}x)"
        )
    if hits and max(hits) > 0:
        lines.append(
            f"- prefix hit rate per pod: lowest {min(hits):.0%}, mean {statistics.mean(hits):.0%}"
        )
    return lines


def goal_check(docs: list[Doc]) -> str | None:
    """The goal's lines, or None when the runs lack latency-first or the oracle."""
    present = docs[0]["policies"]
    if OURS not in present or "oracle" not in present:
        return None
    if not any(p in present for p in BASELINES):
        return None
    lines = [
        _headline(docs, "TTFT p90", ("ttft_ms", "p90"), lower=True),
        _headline(docs, "SLO attainment", ("slo_attainment",), lower=False),
    ]
    return "\n".join(lines + _secondary(docs))


def _cell(docs: list[Doc], policy: str, path: tuple[str, ...], slo: bool) -> str:
    got = values(docs, policy, *path)
    mean_ = statistics.mean(got)
    if slo:
        return f"{mean_:.1%} ({min(got):.1%}-{max(got):.1%})"
    return f"{mean_:,.0f} ({min(got):,.0f}-{max(got):,.0f})"


def summary_table(runs: dict[str, list[Doc]]) -> str:
    """One line per workload: the best baseline (by mean TTFT p90), latency-first and the
    oracle, TTFT p90 and SLO attainment with the seeds' ranges, and the verdicts."""
    lines = [
        "| workload | best baseline | its TTFT p90 ms | latency-first TTFT p90 ms "
        "| oracle TTFT p90 ms | best baseline SLO met | latency-first SLO met | oracle SLO met "
        "| verdict TTFT p90 / SLO |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    p90, slo = ("ttft_ms", "p90"), ("slo_attainment",)
    for workload, docs in runs.items():
        present = [p for p in BASELINES if p in docs[0]["policies"]]
        best = min(present, key=lambda p: mean(docs, p, *p90))
        verdicts = [_judge(docs, p90, lower=True)[1], _judge(docs, slo, lower=False)[1]]
        lines.append(
            f"| {workload} | {best} | {_cell(docs, best, p90, False)} "
            f"| {_cell(docs, OURS, p90, False)} | {_cell(docs, 'oracle', p90, False)} "
            f"| {_cell(docs, best, slo, True)} | {_cell(docs, OURS, slo, True)} "
            f"| {_cell(docs, 'oracle', slo, True)} | {' / '.join(verdicts)} |"
        )
    return "\n".join(lines)


def lowest_within_class(docs: list[Doc]) -> float | None:
    """latency-first's lowest pod share over the mean share of its class's pods, over the
    runs; None for a pool of one class (the fair-share line covers it)."""
    lowest: float | None = None
    for doc in docs:
        classes = doc.get("pod_classes") or []
        shares = doc["policies"][OURS]["pod_share"]
        if len(set(classes)) < 2 or len(classes) != len(shares):
            continue
        for name in set(classes):
            mine = [s for s, c in zip(shares, classes, strict=True) if c == name]
            mean_share = statistics.mean(mine)
            if mean_share > 0:
                ratio = min(mine) / mean_share
                lowest = ratio if lowest is None else min(lowest, ratio)
    return lowest
