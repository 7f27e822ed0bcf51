"""The answer: one screen of text, and the JSON document with every figure shown."""

from __future__ import annotations

import json
import math
import os
import secrets
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from advisor.class_report import class_json, class_lines
from advisor.classes import ClassPool
from advisor.cost import Cost
from advisor.fit import ERROR_LIMIT, FitReport
from advisor.profile import ASSUMED_OUTPUT, Profile, Spread
from advisor.role_report import role_json, role_lines, role_table
from advisor.roles import RolePool
from advisor.simulate import PolicyRuns, Simulation
from advisor.verdict import Comparison, Verdict, over_seeds
from advisor.workload import Plan


@dataclass(frozen=True)
class Timings:
    read_s: float
    fit_s: float
    simulate_s: float
    total_s: float


@dataclass(frozen=True)
class Advice:
    store: str  # the URL, password hidden
    hours: float
    seeds: tuple[int, ...]
    profile: Profile
    fit: FitReport | None
    classes: ClassPool | None  # the simulated pool's hardware classes
    plan: Plan | None
    simulation: Simulation | None
    verdict: Verdict
    reason: str
    cost: Cost
    timings: Timings
    roles: RolePool | None = None  # a prefill/decode pool (advisor.roles); None: monolithic


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def _ranged(values: list[float | None], share: bool = False) -> str:
    r = over_seeds(values)
    if r is None:
        return "-"
    if share:
        return f"{r.mean:.1%} ({r.low:.1%}-{r.high:.1%})"
    return f"{_ms(r.mean)} ({_ms(r.low)}-{_ms(r.high)})"


def _triple(s: Spread, unit: str = "") -> str:
    return f"{s.p50:,.0f} / {s.p90:,.0f} / {s.p99:,.0f}{unit}"


def traffic_lines(a: Advice) -> list[str]:
    p = a.profile
    outputs = (
        f"outputs p50/p90/p99 {_triple(p.output_tokens)} (TPOT rows' num_tokens_generated)"
        if p.output_source == "tpot rows"
        else f"outputs assumed: lognormal, median {ASSUMED_OUTPUT.median:g}, sigma "
        f"{ASSUMED_OUTPUT.sigma:g} (no TPOT row carries num_tokens_generated)"
    )
    load = p.load
    return [
        f"traffic   prompts p50/p90/p99 {_triple(p.input_tokens)} tokens "
        f"(CV {p.input_tokens.cv:.2f}); {outputs}",
        f"          {p.rate.mean:,.1f} requests/min (p50 {p.rate.p50:,.1f}, peak minute "
        f"{p.rate.peak:,.1f}); prefix reuse in {p.prefix.reused_share:.0%} of requests "
        f"(median score {p.prefix.scores.p50:.2f})",
        f"          load: waiting p50/p90/p99 {_triple(load.waiting)} (a queue in "
        f"{load.queued_share:.0%} of rows); running {_triple(load.running)}; KV use p50/p90 "
        f"{load.kv_cache.p50:.0%} / {load.kv_cache.p90:.0%}",
    ]


def fit_lines(fit: FitReport) -> list[str]:
    lines = [
        f"pod model {fit.hardware} vs {fit.rows_checked} rebuilt rows (simulated / "
        f"measured median - 1; * = off by more than {ERROR_LIMIT:.0%}):"
    ]
    for pod_class in dict.fromkeys(c.pod_class for c in fit.cells):  # per class, in order
        for target in ("ttft", "tpot"):
            cells = [c for c in fit.cells if c.target == target and c.pod_class == pod_class]
            if cells:
                text = ", ".join(
                    f"{c.band} {c.error:+.0%}{'*' if c in fit.off else ''} (n={c.rows})"
                    for c in cells
                )
                of = f"{pod_class} " if pod_class else ""
                lines.append(f"          {of}{target.upper()}: {text}")
    return lines


def policy_table(sim: Simulation) -> list[str]:
    lines = [
        "| policy | TTFT p50 ms | TTFT p90 ms | TPOT p90 ms | SLO met | unfinished |",
        "|---|---|---|---|---|---|",
    ]
    for runs in sim.policies:
        s = runs.seeds
        lines.append(
            f"| {runs.name} | {_ranged([x.ttft_p50_ms for x in s])} "
            f"| {_ranged([x.ttft_p90_ms for x in s])} | {_ranged([x.tpot_p90_ms for x in s])} "
            f"| {_ranged([x.slo_attainment for x in s], share=True)} "
            f"| {sum(x.unfinished for x in s)} |"
        )
    return lines


def plan_line(plan: Plan, sim: Simulation, seeds: tuple[int, ...]) -> str:
    scaled = f" (as {plan.sim_pods} at the same rate per pod)" if plan.sim_pods != plan.pods else ""
    slos = (
        "none"
        if plan.slo_ttft_ms is None and plan.slo_tpot_ms is None
        else (f"TTFT {_ms(plan.slo_ttft_ms)} ms, TPOT {_ms(plan.slo_tpot_ms)} ms")
    )
    return (
        f"simulated {plan.pods} pods{scaled}, {plan.duration_s:.0f} s of arrivals "
        f"(the first {plan.warmup_s:.0f} s warm-up, not scored; the rate curve "
        f"{plan.compression:.1f}x compressed), seeds {','.join(map(str, seeds))}, "
        f"{min(sim.requests_per_seed):,}-{max(sim.requests_per_seed):,} requests per seed; "
        f"predictor policies paced x{plan.speedup:.0f}, warmed on {sim.trained_rows:,} rows; "
        f"SLOs: {slos}"
    )


def change_line(verdict: Verdict) -> str | None:
    parts = []
    if verdict.ttft is not None:
        c = verdict.ttft
        parts.append(f"TTFT p90 {c.predictor} vs {c.baseline} {c.change:+.1%}")
    if verdict.slo is not None:
        c = verdict.slo
        parts.append(f"SLO attainment {c.predictor} vs {c.baseline} {c.change * 100:+.1f} points")
    return "change    " + "; ".join(parts) if parts else None


def cost_line(cost: Cost) -> str:
    low, high = cost.trainer_memory_mb
    return (
        f"cost      prediction: {cost.prediction_workers} worker(s), "
        f"{cost.prediction_cpu_cores:.2g} cores at {cost.picks_per_s:,.1f} picks/s of "
        f"{cost.rows_per_call} rows, {cost.prediction_memory_mb:.0f} MB; trainer: "
        f"{cost.trainer_cpu_cores:.2f} cores, {low:.0f}-{high:.0f} MB (measured footprints, "
        "benchmarks/README.md)"
    )


def screen(a: Advice) -> str:
    p = a.profile
    lines = [
        f"store     {a.store}: newest {a.hours:g} h = {p.rows:,} rows ({p.request_rows:,} "
        f"requests) over {p.minutes:.1f} minutes",
        *traffic_lines(a),
    ]
    if a.classes is not None:
        lines += class_lines(a.classes)
    if a.roles is not None:
        lines += role_lines(a.roles)
    if a.fit is not None:
        lines += fit_lines(a.fit)
    if a.simulation is not None and a.plan is not None:
        lines += [plan_line(a.plan, a.simulation, a.seeds), *policy_table(a.simulation)]
        lines += role_table(a.simulation)
    lines.append(f"verdict   {a.verdict.answer} (confidence {a.verdict.confidence})")
    lines += [f"          low confidence: {r}" for r in a.verdict.confidence_reasons]
    lines += [line for line in (change_line(a.verdict),) if line]
    lines += [f"reason    {a.reason}", cost_line(a.cost)]
    t = a.timings
    lines.append(
        f"answered in {t.total_s:.1f} s (read {t.read_s:.1f} s, fit {t.fit_s:.1f} s, "
        f"simulation {t.simulate_s:.1f} s)"
    )
    return "\n".join(lines)


def _policy_json(runs: PolicyRuns) -> dict[str, Any]:
    s = runs.seeds
    mean = {
        name: over_seeds(values)
        for name, values in (
            ("ttft_p50", [x.ttft_p50_ms for x in s]),
            ("ttft_p90", [x.ttft_p90_ms for x in s]),
            ("tpot_p90", [x.tpot_p90_ms for x in s]),
            ("slo", [x.slo_attainment for x in s]),
        )
    }

    def m(key: str) -> float | None:
        r = mean[key]
        return None if r is None else r.mean

    return {
        "ttft_ms": {"p50": m("ttft_p50"), "p90": m("ttft_p90")},
        "tpot_ms": {"p90": m("tpot_p90")},
        "slo_attainment": m("slo"),
        "ranges": {k: None if r is None else asdict(r) for k, r in mean.items()},
        "seeds": [asdict(x) for x in s],
    }


def _comparison(c: Comparison | None) -> dict[str, Any] | None:
    return None if c is None else asdict(c)


def document(a: Advice) -> dict[str, Any]:
    v = a.verdict
    sim = a.simulation
    return {
        "verdict": v.answer,
        "reason": a.reason,
        "confidence": v.confidence,
        "confidence_reasons": list(v.confidence_reasons),
        "missing": list(v.missing),
        "store": a.store,
        "window_hours": a.hours,
        "rows": a.profile.rows,
        "minutes": a.profile.minutes,
        "profile": asdict(a.profile),
        "fit_error": None
        if a.fit is None
        else {
            **asdict(a.fit),
            "cells": [{**asdict(c), "error": c.error, "judged": c.judged} for c in a.fit.cells],
            "off": [asdict(c) for c in a.fit.off],
        },
        "classes": class_json(a.classes),
        "roles": role_json(a.roles),
        "simulation": None
        if sim is None or a.plan is None
        else {
            **asdict(a.plan),
            "seeds": list(a.seeds),
            "requests_per_seed": list(sim.requests_per_seed),
            "trained_rows": sim.trained_rows,
            "wall_s": sim.wall_s,
        },
        "policies": {} if sim is None else {p.name: _policy_json(p) for p in sim.policies},
        "expected_change": {"ttft_p90": _comparison(v.ttft), "slo_attainment": _comparison(v.slo)},
        "cost": {**asdict(a.cost), "total_cpu_cores": a.cost.total_cpu_cores},
        "elapsed_s": asdict(a.timings),
    }


def _finite(value: Any) -> Any:
    """`value` with NaN and infinities as null: JSON has no such numbers."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def write_document(path: Path, doc: dict[str, Any]) -> None:
    """Replace `path` with `doc` as JSON atomically: written to a temporary file of its own
    in the same folder, flushed to disk, then renamed over `path`. A reader (the trainer's
    GET /advice) sees the previous answer or this one whole, never half a file; on a
    failure `path` is left as it was and the temporary file is removed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = (json.dumps(_finite(doc), indent=2, allow_nan=False) + "\n").encode()
    temp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    # 0o666 less the umask, as a plain write: the trainer may run as another user.
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def write_json(path: Path, a: Advice) -> None:
    write_document(path, document(a))
