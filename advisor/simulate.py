"""Serve the rebuilt workload under every policy and seed, with poolsim's engine, policies
and metrics, and keep the figures the advice reads.

Seed s means the workload drawn with seed s (advisor.workload) and the policies' seed s,
as in `simulate`. Policies without a predictor run first, as fast as the CPU allows; the
first of them also records the training rows that warm the shared predictor
(advisor.predictor); then the predictor policies run paced at the plan's speedup. No
decision regret is measured (its look-aheads would double the time). A run stops DRAIN_S
simulated seconds after its last arrival: requests still in flight then are unfinished
(an SLO miss). Figures count the requests that arrived after the plan's warm-up. The pods
may be of several hardware classes (advisor.classes: the Runner's pool, one per pod), and
have prefill and decode roles (advisor.roles: the Runner's `pd`); a P/D run also keeps
each role's figures (poolsim.metrics_pd) over the same scored requests.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from advisor.predictor import Recording, SharedPredictor, TrainingRow
from advisor.progress import Progress
from advisor.workload import Plan
from poolsim.engine import Engine, RunResult
from poolsim.hardware import Hardware
from poolsim.metrics import summarize
from poolsim.metrics_pd import by_role
from poolsim.policies import make_policy
from poolsim.policy_api import Policy, PolicyOptions
from poolsim.request import Request
from poolsim.roles import DEFAULT_PD_THRESHOLD, PdConfig

PREDICTOR_POLICIES = ("predicted-latency", "latency-first")
BASELINES = ("heuristic", "token-load", "round-robin")
DEFAULT_POLICIES = (*BASELINES, *PREDICTOR_POLICIES, "oracle")
# baselines too when run: advise adds token-load-per-class for a pool mixing hardware
# classes (advisor.classes), pd-heuristic for a prefill/decode pool (advisor.roles)
VERDICT_BASELINES = (*BASELINES, "token-load-per-class", "pd-heuristic")
DRAIN_S = 60.0
MIN_WARM_ROWS = 20  # the trainer's first model (a running p90) needs 10 per target


def is_predictor(name: str) -> bool:
    return name.startswith(PREDICTOR_POLICIES)


@dataclass(frozen=True)
class RoleFigures:
    """One P/D role's figures in one seed (poolsim.metrics_pd.by_role)."""

    role: str
    pods: int
    requests: int  # scored requests through its pods
    share: float
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None  # None for prefill: it streams no tokens
    slo_attainment: float | None


@dataclass(frozen=True)
class SeedFigures:
    seed: int
    requests: int  # scored: arrived after the warm-up
    unfinished: int
    ttft_p50_ms: float | None
    ttft_p90_ms: float | None
    tpot_p90_ms: float | None
    slo_attainment: float | None  # None without SLOs
    wall_s: float
    by_role: tuple[RoleFigures, ...] = ()  # a P/D pool's roles, prefill first


@dataclass(frozen=True)
class PolicyRuns:
    name: str
    seeds: tuple[SeedFigures, ...]
    ttfts_ms: tuple[float, ...]  # the first seed's scored TTFTs (the CDF plot)


@dataclass(frozen=True)
class Simulation:
    policies: tuple[PolicyRuns, ...]
    requests_per_seed: tuple[int, ...]  # generated, warm-up included
    trained_rows: int  # rows the shared predictor was warmed with
    wall_s: float

    def get(self, name: str) -> PolicyRuns | None:
        return next((p for p in self.policies if p.name == name), None)


def scored_figures(
    result: RunResult, warmup_s: float, seed: int
) -> tuple[SeedFigures, list[float]]:
    """poolsim.metrics.summarize over the requests that arrived after the warm-up."""
    kept = replace(
        result,
        completions=[c for c in result.completions if c.request.arrival_s >= warmup_s],
        unfinished=[r for r in result.unfinished if r.arrival_s >= warmup_s],
    )
    m = summarize(kept)
    figures = SeedFigures(
        seed=seed,
        requests=m["requests"],
        unfinished=m["unfinished"],
        ttft_p50_ms=m["ttft_ms"]["p50"],
        ttft_p90_ms=m["ttft_ms"]["p90"],
        tpot_p90_ms=m["tpot_ms"]["p90"],
        slo_attainment=m["slo_attainment"],
        wall_s=result.wall_s,
        by_role=_roles(kept),
    )
    return figures, [c.ttft_ms for c in kept.completions]


def _roles(kept: RunResult) -> tuple[RoleFigures, ...]:
    if kept.pd is None:
        return ()
    scored = {c.request.id for c in kept.completions} | {r.id for r in kept.unfinished}
    kept = replace(kept, pd_routes={k: v for k, v in kept.pd_routes.items() if k in scored})
    return tuple(
        RoleFigures(
            role=role,
            pods=f["pods"],
            requests=f["requests"],
            share=f["share"],
            ttft_p90_ms=f["ttft_ms"],
            tpot_p90_ms=f["tpot_ms"],
            slo_attainment=f["slo_attainment"],
        )
        for role, f in by_role(kept).items()
    )


@dataclass
class Runner:
    """One advice's runs: the plan, each simulated pod's class, the progress, the shared
    predictor."""

    plan: Plan
    pool: Sequence[Hardware]  # plan.sim_pods of them
    progress: Progress
    shared: SharedPredictor | None = None
    pd: PdConfig | None = None  # a P/D pool's roles, one per pod of `pool`

    def run(self, policy: Policy, requests: Sequence[Request], label: str) -> RunResult:
        last = max((r.arrival_s for r in requests), default=0.0)
        bar = self.progress.bar(label, last)
        engine = Engine(
            requests,
            len(self.pool),
            list(self.pool),
            policy,
            speedup=self.plan.speedup if policy.paced else None,
            drain_limit_s=last + DRAIN_S,
            progress=bar,
            regret=False,
            pd=self.pd,
        )
        result = asyncio.run(engine.run())
        self.progress.finished(label, bar, min(result.sim_end_s, last), result.wall_s)
        return result

    def options(self, name: str, seed: int) -> PolicyOptions:
        threshold = self.pd.threshold if self.pd is not None else DEFAULT_PD_THRESHOLD
        if is_predictor(name) and self.shared is not None:
            return replace(self.shared.options(seed, self.plan.speedup), pd_threshold=threshold)
        return PolicyOptions(seed=seed, speedup=self.plan.speedup, pd_threshold=threshold)


def _policy_runs(
    runner: Runner,
    name: str,
    workloads: dict[int, list[Request]],
    record: list[TrainingRow] | None,
) -> PolicyRuns:
    seeds: list[SeedFigures] = []
    first_ttfts: list[float] = []
    for seed, requests in workloads.items():
        policy: Policy = make_policy(name, seed, options=runner.options(name, seed))
        recording = Recording(policy) if record is not None and not record else None
        result = runner.run(recording or policy, requests, f"{name} seed {seed}")
        if recording is not None and record is not None:
            record.extend(recording.rows)
        figures, ttfts = scored_figures(result, runner.plan.warmup_s, seed)
        seeds.append(figures)
        first_ttfts = first_ttfts or ttfts
    return PolicyRuns(name, tuple(seeds), tuple(first_ttfts))


def _warm(shared: SharedPredictor, rows: list[TrainingRow], progress: Progress) -> None:
    if len(rows) < MIN_WARM_ROWS:
        progress.note("no run without a predictor to warm it on: it starts cold, as in simulate")
        return
    progress.note(f"warming the predictor on {len(rows):,} training rows")
    if not shared.train(rows):
        progress.note("no trained model served in time: the predictor starts on the prior")


def simulate_all(
    names: Sequence[str],
    seeds: Sequence[int],
    make_requests: Callable[[int], list[Request]],
    runner: Runner,
) -> Simulation:
    """Every policy on every seed's workload (see the module docstring)."""
    started = time.perf_counter()
    paced = [n for n in names if is_predictor(n)]
    plain = [n for n in names if not is_predictor(n)]
    runner.progress.total_runs = len(names) * len(seeds)
    if paced:
        runner.progress.note("starting our training and prediction servers (background)")
        runner.shared = SharedPredictor(runner.plan.speedup).begin()
    try:
        workloads = {seed: make_requests(seed) for seed in seeds}
        rows: list[TrainingRow] = []
        done = [_policy_runs(runner, n, workloads, rows if paced else None) for n in plain]
        if runner.shared is not None:
            _warm(runner.shared, rows, runner.progress)
        done += [_policy_runs(runner, n, workloads, None) for n in paced]
    finally:
        if runner.shared is not None:
            runner.shared.stop()
    order = {name: index for index, name in enumerate(names)}
    return Simulation(
        policies=tuple(sorted(done, key=lambda p: order[p.name])),
        requests_per_seed=tuple(len(w) for w in workloads.values()),
        trained_rows=runner.shared.trained_rows if runner.shared else 0,
        wall_s=time.perf_counter() - started,
    )
