"""The comparison tables of `bench_poolsim compare`, from the JSON of `latency-predictor
simulate` runs (one document per seed): means over the seeds, with the seeds' range where
it matters, the predicted policies' served p90s, SLO classes and the phase-2 goal check."""

from __future__ import annotations

import statistics
from typing import Any

Doc = dict[str, Any]
HEURISTICS = ("round-robin", "least-requests", "heuristic")  # the goal's baselines
PREDICTED = "predicted-latency"


def values(docs: list[Doc], policy: str, *path: str) -> list[float]:
    """The figure at `path` of `policy` in every document (None -> nan)."""
    out = []
    for doc in docs:
        value: Any = doc["policies"][policy]
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        out.append(float("nan") if value is None else float(value))
    return out


def mean(docs: list[Doc], policy: str, *path: str) -> float:
    return statistics.mean(values(docs, policy, *path))


def _ms(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _triple(docs: list[Doc], policy: str, key: str) -> str:
    return " / ".join(_ms(mean(docs, policy, key, p)) for p in ("p50", "p90", "p99"))


def table(docs: list[Doc]) -> str:
    lines = [
        "| policy | TTFT p50 / p90 / p99 ms | TTFT p90 seeds | TPOT p50 / p90 / p99 ms "
        "| E2E p50 / p90 / p99 ms | SLO met (seeds) | req/s | pod share min-max "
        "| prefix hit (mean) | wall s / run |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for policy in docs[0]["policies"]:
        p90 = values(docs, policy, "ttft_ms", "p90")
        slo = values(docs, policy, "slo_attainment")
        shares = [s for d in docs for s in d["policies"][policy]["pod_share"]]
        hits = [h for d in docs for h in d["policies"][policy]["prefix_hit_rate"] if h is not None]
        lines.append(
            f"| {policy} | {_triple(docs, policy, 'ttft_ms')} "
            f"| {min(p90):,.0f}-{max(p90):,.0f} | {_triple(docs, policy, 'tpot_ms')} "
            f"| {_triple(docs, policy, 'e2e_ms')} "
            f"| {statistics.mean(slo):.1%} ({min(slo):.1%}-{max(slo):.1%}) "
            f"| {mean(docs, policy, 'throughput_rps'):.1f} "
            f"| {min(shares):.1%}-{max(shares):.1%} "
            f"| {statistics.mean(hits) if hits else 0:.0%} "
            f"| {mean(docs, policy, 'wall_s'):.0f} |"
        )
    return "\n".join(lines)


def served_table(docs: list[Doc]) -> str | None:
    """Per predicted policy: the p90s its picks acted on against what the chosen pod then
    measured (coverage, pinball q = 0.9), overall and after the cold-start prior; the
    warm-up (requests routed by the prior and by the first 3 models); fallbacks and holds."""
    names = [
        n for n in docs[0]["policies"] if "served_ttft_rows" in docs[0]["policies"][n]["policy"]
    ]
    if not names:
        return None
    lines = [
        "| policy | TTFT coverage (seeds) | TTFT pinball ms | TPOT coverage | TPOT pinball ms "
        "| after the prior: TTFT cov / TPOT cov | routed by prior / first 3 models "
        "| model versions | first model at s | cadence / mean model age s | holds (wall s) "
        "| fallbacks |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in names:

        def f(key: str, name: str = name) -> float:
            return mean(docs, name, "policy", key)

        cov = values(docs, name, "policy", "served_ttft_coverage")
        lines.append(
            f"| {name} | {statistics.mean(cov):.3f} ({min(cov):.3f}-{max(cov):.3f}) "
            f"| {_ms(f('served_ttft_pinball_ms'))} | {f('served_tpot_coverage'):.3f} "
            f"| {_ms(f('served_tpot_pinball_ms'))} "
            f"| {f('trained_ttft_coverage'):.3f} / {f('trained_tpot_coverage'):.3f} "
            f"| {f('routed_by_prior'):,.0f} / {f('routed_by_first_3_models'):,.0f} "
            f"| {f('model_versions_served'):.0f} | {f('first_model_at_s'):.0f} "
            f"| {f('retrain_cadence_s'):.1f} / {f('mean_model_age_s'):.1f} "
            f"| {f('model_age_holds'):.0f} ({f('model_age_hold_wall_s'):.0f}) "
            f"| {f('fallbacks'):.0f} |"
        )
    return "\n".join(lines)


def slo_class_table(docs: list[Doc]) -> str | None:
    """TTFT p90 / SLO attainment per TTFT SLO class, when a workload has several."""
    first = docs[0]["policies"]
    classes = list(next(iter(first.values())).get("by_ttft_slo", {}))
    if len(classes) < 2:
        return None
    head = " | ".join(f"TTFT SLO {c} ms: p90 / SLO met" for c in classes)
    lines = [f"| policy | {head} |", "|---|" + "---|" * len(classes)]
    for policy in first:
        cells = [
            f"{_ms(mean(docs, policy, 'by_ttft_slo', c, 'ttft_p90_ms'))} / "
            f"{mean(docs, policy, 'by_ttft_slo', c, 'slo_attainment'):.1%}"
            for c in classes
        ]
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def goal_check(docs: list[Doc]) -> str | None:
    """Phase 2's goal: predicted-latency beats round-robin, least-requests and the heuristic
    on TTFT p90 and SLO attainment, and closes at least half of the gap between the best of
    them and the oracle (means over the seeds)."""
    present = docs[0]["policies"]
    if PREDICTED not in present or "oracle" not in present:
        return None
    baselines = [p for p in HEURISTICS if p in present]
    if not baselines:
        return None
    out = []
    for label, path, better in (
        ("TTFT p90", ("ttft_ms", "p90"), min),
        ("SLO attainment", ("slo_attainment",), max),
    ):
        base = {p: mean(docs, p, *path) for p in baselines}
        best = better(base, key=lambda p: base[p])
        ours, oracle = mean(docs, PREDICTED, *path), mean(docs, "oracle", *path)
        beats = all((ours < v) if better is min else (ours > v) for v in base.values())
        gap = oracle - base[best]
        # a gap only counts where the seeds' ranges of the two do not overlap
        oracle_seeds, best_seeds = values(docs, "oracle", *path), values(docs, best, *path)
        apart = max(oracle_seeds) < min(best_seeds) or min(oracle_seeds) > max(best_seeds)
        real_gap = apart and ((gap < 0) if better is min else (gap > 0))
        closed = (
            f"closes {(ours - base[best]) / gap:.0%} of the gap to the oracle (goal >= 50 %)"
            if real_gap
            else f"no gap to close (the oracle's seeds overlap {best}'s, or it is worse)"
        )
        out.append(
            f"- {label}: predicted-latency {_fmt(label, ours)}, best baseline {best} "
            f"{_fmt(label, base[best])}, oracle {_fmt(label, oracle)}; beats all of "
            f"{', '.join(baselines)}: {'yes' if beats else 'no'}; {closed}"
        )
    return "\n".join(out)


def _fmt(label: str, value: float) -> str:
    return f"{value:.1%}" if label.startswith("SLO") else f"{value:,.0f} ms"
