"""The advice, step by step: read, profile, fit, rebuild, simulate, decide, explain."""

from __future__ import annotations

import time
from dataclasses import dataclass

import httpx
import numpy as np

from advisor.cost import sidecar_cost
from advisor.fit import FitReport, check_fit
from advisor.options import Options
from advisor.profile import Profile, RateCurve, output_model, output_tokens, profile
from advisor.progress import Progress
from advisor.reason import explain
from advisor.report import Advice, Timings
from advisor.rows import StoreError, StoreRows, read_rows, safe_url
from advisor.simulate import Runner, Simulation, simulate_all
from advisor.verdict import data_gaps, decide
from advisor.workload import Plan, build_requests, make_plan, sizes_of
from poolsim.hardware import hardware


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


def _simulate(
    options: Options, rows: StoreRows, prof: Profile, progress: Progress
) -> tuple[Plan, Simulation]:
    hw = hardware(options.hardware)
    plan = make_plan(prof, options.pods, options.slos, options.sim_seconds, options.speedup)
    sizes = sizes_of(rows)
    runner = Runner(plan, hw, progress)
    try:
        sim = simulate_all(
            options.policies,
            options.seeds,
            lambda seed: build_requests(sizes, prof, plan, hw, seed),
            runner,
        )
    except (RuntimeError, TimeoutError, ValueError, httpx.HTTPError) as exc:
        raise AdviseError(f"the simulation failed: {exc}") from None
    return plan, sim


def advise(options: Options, progress: bool = True) -> Advised:
    notes = Progress(progress)
    started = time.perf_counter()
    rows = _read(options, notes)
    read_s = time.perf_counter() - started
    prof = profile(rows)
    fit: FitReport | None = None
    plan: Plan | None = None
    sim: Simulation | None = None
    fit_s = simulate_s = 0.0
    if not data_gaps(prof):
        notes.note(f"{prof.rows:,} rows over {prof.minutes:.1f} min; fitting the pod model")
        fit_started = time.perf_counter()
        fit = check_fit(rows, hardware(options.hardware), output_model(rows), options.fit_rows)
        fit_s = time.perf_counter() - fit_started
        plan, sim = _simulate(options, rows, prof, notes)
        simulate_s = sim.wall_s
    verdict = decide(prof, fit, sim)
    advice = Advice(
        store=safe_url(options.url),
        hours=options.hours,
        seeds=options.seeds,
        profile=prof,
        fit=fit,
        plan=plan,
        simulation=sim,
        verdict=verdict,
        reason=explain(prof, verdict, sim),
        cost=sidecar_cost(prof.rate.peak, options.pods),
        timings=Timings(read_s, fit_s, simulate_s, time.perf_counter() - started),
    )
    return Advised(advice, rows.input_tokens[rows.measures_ttft], output_tokens(rows))
