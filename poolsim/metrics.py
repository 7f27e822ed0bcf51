"""Per-policy figures of one run: latency percentiles, SLO attainment, throughput, how the
pool shared the work (overall and per minute of arrival), the decision regret of the
picks (poolsim.regret), and, for a workload with images only, the encoder caches' figures
(`encoder`; absent otherwise, so a text-only run's figures are as before), and for a
prefill/decode pool only, the figures per role (`by_role`, poolsim.metrics_pd)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NotRequired, TypedDict

import numpy as np

from poolsim.engine import RunResult
from poolsim.metrics_pd import RoleFigures, by_role
from poolsim.request import Completion, Request


class Percentiles(TypedDict):
    p50: float | None
    p90: float | None
    p99: float | None


class SloClass(TypedDict):
    requests: int
    ttft_p90_ms: float | None
    slo_attainment: float


class TtftP50P90(TypedDict):
    p50: float | None
    p90: float | None


class PodClassFigures(TypedDict):
    """One hardware class of the pool (poolsim.hardware): the requests routed to its pods."""

    pods: int
    requests: int  # routed to its pods (completed or not)
    share: float  # of all routed requests
    ttft_ms: TtftP50P90  # of those completed
    slo_attainment: float | None  # of those with an SLO (unfinished: missed)
    # the predicted policies' served TTFT p90s for its pods: share covered (else None)
    served_ttft_coverage: float | None


class ClassShareOverTime(TypedDict):
    """Per hardware class, its share of the requests routed in each bin of arrival time."""

    bin_s: int  # bin i holds arrivals in [bin_s * i, bin_s * (i + 1)) s
    classes: dict[str, list[float]]  # class -> share per bin (0 in a bin without arrivals)


class RegretMinute(TypedDict):
    minute: int  # arrivals in [60 * minute, 60 * (minute + 1)) s
    p50: float | None  # None when no pick of that minute was measured
    p90: float | None
    mean: float | None
    picks: int


class RegretFigures(TypedDict):
    p50: float | None  # ms; None when no regret was measured (e.g. regret off)
    p90: float | None
    mean: float | None
    per_minute: list[RegretMinute]  # every minute up to the last measured pick


class EncoderFigures(TypedDict):
    """The pods' vision encoders (poolsim.encoder), counted at every admission."""

    hit_rate: float  # image tokens found in the pod's encoder cache / image tokens admitted
    hit_rate_per_pod: list[float | None]  # the same per pod (None: no image admitted there)
    encode_s_per_pod: list[float]  # encoder time added to each pod's steps, seconds


class PolicyMetrics(TypedDict):
    requests: int
    completed: int
    unfinished: int
    ttft_ms: Percentiles
    tpot_ms: Percentiles
    e2e_ms: Percentiles
    slo_attainment: float | None
    throughput_rps: float
    output_tokens_per_s: float
    pod_share: list[float]
    # per minute of arrival (index = minute, up to the last arrival), each pod's share of
    # the requests routed in it (all 0 for a minute without arrivals)
    pod_share_per_minute: list[list[float]]
    # per minute of arrival: TTFT percentiles of the requests that arrived in it (warm-up)
    ttft_ms_per_minute: list[Percentiles]
    prefix_hit_rate: list[float | None]
    preemptions: int
    recompute_tokens: int
    wall_s: float
    sim_s: float
    by_ttft_slo: dict[str, SloClass]  # requests grouped by their TTFT SLO ("none": without)
    by_pod_class: dict[str, PodClassFigures]  # per hardware class, in pod order
    regret_ms: RegretFigures
    policy: dict[str, float]
    class_share_over_time: ClassShareOverTime  # per class and 30 s bin of arrival
    encoder: NotRequired[EncoderFigures]  # only when some request carried images
    by_role: NotRequired[dict[str, RoleFigures]]  # only for a prefill/decode pool


def percentiles(values: Sequence[float]) -> Percentiles:
    if not values:
        return {"p50": None, "p90": None, "p99": None}
    p50, p90, p99 = (float(v) for v in np.percentile(np.asarray(values), [50, 90, 99]))
    return {"p50": p50, "p90": p90, "p99": p99}


def slo_attainment(result: RunResult) -> float | None:
    """Share of requests with an SLO that met every SLO they carry (unfinished: missed)."""

    def has_slo(slo_ttft: float | None, slo_tpot: float | None) -> bool:
        return slo_ttft is not None or slo_tpot is not None

    judged = [
        c for c in result.completions if has_slo(c.request.slo_ttft_ms, c.request.slo_tpot_ms)
    ]
    missed = [r for r in result.unfinished if has_slo(r.slo_ttft_ms, r.slo_tpot_ms)]
    total = len(judged) + len(missed)
    return sum(c.slo_met for c in judged) / total if total else None


def by_ttft_slo(result: RunResult) -> dict[str, SloClass]:
    """TTFT p90 and SLO attainment per TTFT SLO class (e.g. the sizes of `mixed`); an
    unfinished request counts as a miss."""
    groups: dict[str, tuple[list[float], list[bool]]] = {}
    for done in result.completions:
        ttfts, met = groups.setdefault(_slo_key(done.request.slo_ttft_ms), ([], []))
        ttfts.append(done.ttft_ms)
        met.append(done.slo_met)
    for request in result.unfinished:
        groups.setdefault(_slo_key(request.slo_ttft_ms), ([], []))[1].append(False)
    return {
        key: {
            "requests": len(met),
            "ttft_p90_ms": percentiles(ttfts)["p90"],
            "slo_attainment": sum(met) / len(met),
        }
        for key, (ttfts, met) in sorted(groups.items(), key=lambda item: _slo_order(item[0]))
    }


def _slo_order(key: str) -> float:
    return float("inf") if key == "none" else float(key)


def _slo_key(slo_ttft_ms: float | None) -> str:
    return "none" if slo_ttft_ms is None else f"{slo_ttft_ms:g}"


def _has_slo(request: Request) -> bool:
    return request.slo_ttft_ms is not None or request.slo_tpot_ms is not None


def by_pod_class(result: RunResult) -> dict[str, PodClassFigures]:
    """Per hardware class (in order of its first pod): its pods, the requests routed there
    and their share, TTFT p50/p90, SLO attainment (an unfinished request, still on a pod
    at the end, is a miss), and the served TTFT coverage a predicted policy reports for
    that class (`served_ttft_coverage@CLASS` in its summary; None for the others)."""
    class_of = [pod.hw.name for pod in result.pods]
    classes = list(dict.fromkeys(class_of))
    routed = {name: 0 for name in classes}
    for pod in result.pods:
        routed[pod.hw.name] += pod.requests_in
    total = sum(routed.values())
    ttfts: dict[str, list[float]] = {name: [] for name in classes}
    met: dict[str, list[bool]] = {name: [] for name in classes}
    for done in result.completions:
        name = class_of[done.pod]
        ttfts[name].append(done.ttft_ms)
        if _has_slo(done.request):
            met[name].append(done.slo_met)
    for pod in result.pods:  # unfinished: still queued or running where they were routed
        for seq in (*pod.waiting, *pod.running):
            if _has_slo(seq.request):
                met[pod.hw.name].append(False)
    out: dict[str, PodClassFigures] = {}
    for name in classes:
        p = percentiles(ttfts[name])
        served = result.policy_summary.get(f"served_ttft_coverage@{name}")
        out[name] = {
            "pods": class_of.count(name),
            "requests": routed[name],
            "share": routed[name] / total if total else 0.0,
            "ttft_ms": {"p50": p["p50"], "p90": p["p90"]},
            "slo_attainment": sum(met[name]) / len(met[name]) if met[name] else None,
            "served_ttft_coverage": served,
        }
    return out


def hit_rates(result: RunResult) -> list[float | None]:
    """Per pod: prompt tokens found in its prefix cache / prompt tokens it served (a
    split request's prompt counts on its prefill pod and its decode pod, each with its
    own hit)."""
    hits = [0] * len(result.pods)
    tokens = [0] * len(result.pods)
    for done in result.completions:
        hits[done.pod] += done.prefix_hit_tokens
        tokens[done.pod] += done.request.input_tokens
        if done.prefill_pod is not None:
            hits[done.prefill_pod] += done.prefill_hit_tokens
            tokens[done.prefill_pod] += done.request.input_tokens
    return [h / t if t else None for h, t in zip(hits, tokens, strict=True)]


def regret_figures(regrets: Sequence[tuple[float, float]]) -> RegretFigures:
    """p50, p90 and mean of (arrival_s, regret ms) pairs, overall and per minute."""
    minutes: dict[int, list[float]] = {}
    for arrival_s, regret_ms in regrets:
        minutes.setdefault(int(arrival_s // 60), []).append(regret_ms)
    overall = _p50_p90_mean([r for _, r in regrets])
    per_minute: list[RegretMinute] = []
    for minute in range(max(minutes, default=-1) + 1):
        values = minutes.get(minute, [])
        p50, p90, mean = _p50_p90_mean(values)
        per_minute.append(
            {"minute": minute, "p50": p50, "p90": p90, "mean": mean, "picks": len(values)}
        )
    return {"p50": overall[0], "p90": overall[1], "mean": overall[2], "per_minute": per_minute}


def _p50_p90_mean(values: Sequence[float]) -> tuple[float | None, float | None, float | None]:
    if not values:
        return None, None, None
    p50, p90 = (float(v) for v in np.percentile(np.asarray(values), [50, 90]))
    return p50, p90, float(np.mean(values))


def pod_share_per_minute(routes: Sequence[tuple[float, int]], pods: int) -> list[list[float]]:
    """Per minute of arrival (index = minute), each pod's share of the requests routed."""
    counts: list[list[int]] = []
    for arrival_s, pod in routes:
        minute = int(arrival_s // 60)
        while len(counts) <= minute:
            counts.append([0] * pods)
        counts[minute][pod] += 1
    return [[n / max(sum(row), 1) for n in row] for row in counts]


CLASS_SHARE_BIN_S = 30


def class_share_over_time(
    routes: Sequence[tuple[float, int]], class_of: Sequence[str], bin_s: int = CLASS_SHARE_BIN_S
) -> ClassShareOverTime:
    """Per class (in order of its first pod; `class_of`: each pod's class) and bin of arrival
    time (up to the last arrival's), the share of that bin's requests routed to its pods."""
    classes = list(dict.fromkeys(class_of))
    column = {name: i for i, name in enumerate(classes)}
    counts: list[list[int]] = []
    for arrival_s, pod in routes:
        slot = int(arrival_s // bin_s)
        while len(counts) <= slot:
            counts.append([0] * len(classes))
        counts[slot][column[class_of[pod]]] += 1
    shares = {name: [row[i] / max(sum(row), 1) for row in counts] for name, i in column.items()}
    return {"bin_s": bin_s, "classes": shares}


def ttft_per_minute(done: Sequence[Completion]) -> list[Percentiles]:
    """TTFT percentiles per minute of arrival (index = minute, up to the last arrival)."""
    minutes: list[list[float]] = []
    for completion in done:
        minute = int(completion.request.arrival_s // 60)
        while len(minutes) <= minute:
            minutes.append([])
        minutes[minute].append(completion.ttft_ms)
    return [percentiles(values) for values in minutes]


def encoder_figures(result: RunResult) -> EncoderFigures | None:
    """The encoder caches' hit rate (pool and per pod) and encoder time per pod; None when
    no pod admitted an image."""
    pods = result.pods
    total = sum(pod.encoder_tokens for pod in pods)
    if not total:
        return None
    return {
        "hit_rate": sum(pod.encoder_hit_tokens for pod in pods) / total,
        "hit_rate_per_pod": [
            pod.encoder_hit_tokens / pod.encoder_tokens if pod.encoder_tokens else None
            for pod in pods
        ],
        "encode_s_per_pod": [pod.encode_ms_total / 1000.0 for pod in pods],
    }


def summarize(result: RunResult) -> PolicyMetrics:
    done = result.completions
    routed = [pod.requests_in for pod in result.pods]
    end = max((c.finish_s for c in done), default=0.0)
    metrics: PolicyMetrics = {
        "requests": len(done) + len(result.unfinished),
        "completed": len(done),
        "unfinished": len(result.unfinished),
        "ttft_ms": percentiles([c.ttft_ms for c in done]),
        "tpot_ms": percentiles([c.tpot_ms for c in done if c.tpot_ms is not None]),
        "e2e_ms": percentiles([c.e2e_ms for c in done]),
        "slo_attainment": slo_attainment(result),
        "throughput_rps": len(done) / end if end else 0.0,
        "output_tokens_per_s": sum(c.request.output_tokens for c in done) / end if end else 0.0,
        "pod_share": [n / max(sum(routed), 1) for n in routed],
        "pod_share_per_minute": pod_share_per_minute(result.routes, len(result.pods)),
        "ttft_ms_per_minute": ttft_per_minute(done),
        "prefix_hit_rate": hit_rates(result),
        "preemptions": sum(pod.preemptions for pod in result.pods),
        "recompute_tokens": sum(pod.recompute_tokens for pod in result.pods),
        "wall_s": result.wall_s,
        "sim_s": result.sim_end_s,
        "by_ttft_slo": by_ttft_slo(result),
        "by_pod_class": by_pod_class(result),
        "regret_ms": regret_figures(result.regrets),
        "policy": result.policy_summary,
        "class_share_over_time": class_share_over_time(
            result.routes, [pod.hw.name for pod in result.pods]
        ),
    }
    encoder = encoder_figures(result)
    if encoder is not None:
        metrics["encoder"] = encoder
    if result.pd is not None:
        metrics["by_role"] = by_role(result)
    return metrics
