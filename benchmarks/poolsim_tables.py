"""The comparison tables of `bench_poolsim compare`, from the JSON of `latency-predictor
simulate` runs (one document per seed): means over the seeds, with the seeds' range where
it matters, the predicted policies' served p90s and SLO classes (the goal check is
benchmarks/poolsim_goals.py)."""

from __future__ import annotations

import statistics
from typing import Any

Doc = dict[str, Any]


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


def _regret(docs: list[Doc], policy: str) -> str:
    parts = [values(docs, policy, "regret_ms", key) for key in ("p50", "p90", "mean")]
    if any(v != v for part in parts for v in part):  # nan: regret was not measured
        return "-"
    return " / ".join(_ms(statistics.mean(part)) for part in parts)


def table(docs: list[Doc]) -> str:
    lines = [
        "| policy | TTFT p50 / p90 / p99 ms | TTFT p90 seeds | regret p50 / p90 / mean ms "
        "| TPOT p50 / p90 / p99 ms | E2E p50 / p90 / p99 ms | SLO met (seeds) | req/s "
        "| pod share min-max | prefix hit mean (lowest pod) | wall s / run |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for policy in docs[0]["policies"]:
        p90 = values(docs, policy, "ttft_ms", "p90")
        slo = values(docs, policy, "slo_attainment")
        shares = [s for d in docs for s in d["policies"][policy]["pod_share"]]
        hits = [h for d in docs for h in d["policies"][policy]["prefix_hit_rate"] if h is not None]
        lines.append(
            f"| {policy} | {_triple(docs, policy, 'ttft_ms')} "
            f"| {min(p90):,.0f}-{max(p90):,.0f} | {_regret(docs, policy)} "
            f"| {_triple(docs, policy, 'tpot_ms')} "
            f"| {_triple(docs, policy, 'e2e_ms')} "
            f"| {statistics.mean(slo):.1%} ({min(slo):.1%}-{max(slo):.1%}) "
            f"| {mean(docs, policy, 'throughput_rps'):.1f} "
            f"| {min(shares):.1%}-{max(shares):.1%} "
            f"| {statistics.mean(hits) if hits else 0:.0%} ({min(hits) if hits else 0:.0%}) "
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


def pod_class_table(docs: list[Doc]) -> str | None:
    """Per policy and hardware class of a mixed pool (`--hardware h200:4,b200:4`): TTFT p90,
    SLO attainment, share of the requests and the served TTFT p90s' coverage (predicted
    policies), means over the seeds; None for a pool of one class."""
    first = docs[0]["policies"]
    classes = list(next(iter(first.values())).get("by_pod_class", {}))
    if len(classes) < 2:
        return None
    head = " | ".join(f"{c}: TTFT p90 / SLO met / share / served cov" for c in classes)
    lines = [f"| policy | {head} |", "|---|" + "---|" * len(classes)]
    for policy in first:
        cells = []
        for c in classes:
            cov = mean(docs, policy, "by_pod_class", c, "served_ttft_coverage")
            cells.append(
                f"{_ms(mean(docs, policy, 'by_pod_class', c, 'ttft_ms', 'p90'))} / "
                f"{mean(docs, policy, 'by_pod_class', c, 'slo_attainment'):.1%} / "
                f"{mean(docs, policy, 'by_pod_class', c, 'share'):.1%} / "
                + ("-" if cov != cov else f"{cov:.3f}")
            )
        lines.append(f"| {policy} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
