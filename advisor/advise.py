"""The advice, step by step: read, profile, fit, rebuild, simulate, decide, explain."""

from __future__ import annotations

import time
from dataclasses import dataclass, replace

import httpx
import numpy as np

from advisor.classes import ClassPool, for_simulation, labels, policies_for, read_classes
from advisor.cost import sidecar_cost
from advisor.fit import FitReport, check_fit, merged
from advisor.options import Options
from advisor.profile import Profile, RateCurve, output_model, output_tokens, profile
from advisor.progress import Progress
from advisor.reason import explain
from advisor.report import Advice, Timings
from advisor.roles import RolePool, pd_policies, read_roles
from advisor.roles import for_simulation as roles_for_simulation
from advisor.rows import StoreError, StoreRows, read_rows, safe_url
from advisor.simulate import Runner, Simulation, simulate_all
from advisor.verdict import data_gaps, decide
from advisor.workload import Plan, build_requests, make_plan, sizes_of
from poolsim.reconstruct import OutputModel


class AdviseError(Exception):
    """The store cannot be read, or a server of the runs failed: exit 1."""


@dataclass(frozen=True)
class Advised:
    advice: Advice
    inputs: np.ndarray  # the request rows' prompt tokens (the size plot)
    outputs: np.ndarray  # the TPOT rows' output tokens (empty when assumed)

    @property
    def traffic(self) -> tuple[np.ndarray, np.ndarray, RateCurve]:
        return self.inputs, self.outputs, self.advice.profile.rate


def _read(options: Options, progress: Progress) -> StoreRows:
    which = f"pool {options.pool} of " if options.pool else ""
    progress.note(f"reading the newest {options.hours:g} h of {which}{safe_url(options.url)}")
    try:
        return read_rows(options.url, options.hours, pool=options.pool)
    except StoreError as exc:
        raise AdviseError(str(exc)) from None


def _fit(options: Options, rows: StoreRows, pool: ClassPool, outputs: OutputModel) -> FitReport:
    """The pod model against the rows: when the classes came from the rows, each simulated
    class on its rebuilt constants against its own rows; else the one class against every
    row, as before classes were read."""
    if not pool.from_rows:
        return check_fit(rows, pool.classes[0].hardware, outputs, options.fit_rows)
    named = labels(rows, options)
    checked = [c for c in pool.classes if c.rows and c.pods]
    reports = [
        check_fit(rows.subset(named == c.label), c.hardware, outputs, options.fit_rows, c.label)
        for c in checked
    ]
    return merged(", ".join(c.label for c in checked) or "no simulated class has rows", reports)


def _simulate(
    options: Options,
    rows: StoreRows,
    prof: Profile,
    pool: ClassPool,
    roles: RolePool | None,
    progress: Progress,
) -> tuple[Plan, ClassPool, RolePool | None, Simulation]:
    given = max(sum(1 for c in pool.classes if c.pods), 2 if roles is not None else 1)
    plan = make_plan(
        prof, options.pods, options.slos, options.sim_seconds, options.speedup, min_pods=given
    )
    pool = for_simulation(pool, plan.sim_pods)
    names, left_out = policies_for(options.policies, pool)
    for note in left_out:
        progress.note(note)
    pool = replace(pool, notes=pool.notes + left_out)
    if roles is not None:
        roles = roles_for_simulation(roles, plan.sim_pods)
        names = pd_policies(names)
    sizes = sizes_of(rows)
    pods = pool.pods()
    runner = Runner(plan, pods, progress, pd=roles.config() if roles is not None else None)
    try:
        sim = simulate_all(
            names,
            options.seeds,
            lambda seed: build_requests(sizes, prof, plan, pods, seed),
            runner,
        )
    except (RuntimeError, TimeoutError, ValueError, httpx.HTTPError) as exc:
        raise AdviseError(f"the simulation failed: {exc}") from None
    return plan, pool, roles, sim


def advise(options: Options, progress: bool = True) -> Advised:
    notes = Progress(progress)
    started = time.perf_counter()
    rows = _read(options, notes)
    read_s = time.perf_counter() - started
    prof = profile(rows)
    fit: FitReport | None = None
    plan: Plan | None = None
    pool: ClassPool | None = None
    roles: RolePool | None = None
    sim: Simulation | None = None
    fit_s = simulate_s = 0.0
    if not data_gaps(prof):
        notes.note(f"{prof.rows:,} rows over {prof.minutes:.1f} min; fitting the pod model")
        fit_started = time.perf_counter()
        outputs = output_model(rows)
        pool = read_classes(rows, options, outputs)
        if pool.from_rows:
            notes.note(f"hardware classes from the rows: {pool.label}, speeds from the rows")
        roles = read_roles(rows, options, outputs)
        if roles is not None:
            notes.note(f"a prefill/decode pool: {roles.note}")
        fit = _fit(options, rows, pool, outputs)
        fit_s = time.perf_counter() - fit_started
        plan, pool, roles, sim = _simulate(options, rows, prof, pool, roles, notes)
        simulate_s = sim.wall_s
    # The check rebuilds each row's pod as a monolithic one, which a decode pod is not (it
    # never prefills a split request): on P/D rows it is shown, not judged (advisor.roles).
    verdict = decide(prof, fit if roles is None else None, sim)
    advice = Advice(
        store=safe_url(options.url),
        hours=options.hours,
        seeds=options.seeds,
        profile=prof,
        fit=fit,
        classes=pool,
        plan=plan,
        simulation=sim,
        verdict=verdict,
        reason=explain(prof, verdict, sim),
        cost=sidecar_cost(prof.rate.peak, options.pods),
        timings=Timings(read_s, fit_s, simulate_s, time.perf_counter() - started),
        roles=roles,
    )
    return Advised(advice, rows.input_tokens[rows.measures_ttft], output_tokens(rows))
