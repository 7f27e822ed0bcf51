"""Many pools on one core: does every pool retrain within one retraining interval?

    .venv/bin/python -m benchmarks.bench_pools [--pools 50] [--rows 1000] [--passes 3] [--no-keep]
        [--new-rows 100] [--interval 10] [--source traces|synthetic] [--profile] [--cpu N]

Fills a real SQLite store (a temporary file) with `--rows` training rows in each of
`--pools` named pools, opened through the trainer's PoolRegistry (so each pool has the
Retrainer, slot, metrics and model directory a training server gives it; shipped settings,
one fitting thread), pins this process to one CPU, and runs `--passes` passes in which
every pool retrains once, one after the other in the registry's order, as PoolsLoop's one
thread does (its tick of a due pool is Retrainer.run_once). Before every pass but the first
each pool gets `--new-rows` new rows: a pool with none is skipped by design. After each
pass, one pass of every pool's live calibration (the loop's other per-pool work, every
LATENCY_CALIBRATION_INTERVAL_SEC). Then one pass with no new rows (every pool skips).
A pass that follows one longer than `--interval` keeps each target's last model choice
(label `Nk`), as the loop does for a pool whose tick comes late; `--no-keep` never does.

Prints per pass: the total seconds, the per-pool p50 / p90 / max and mean of wall time, the
mean of this process's CPU time (less than the wall time when other work shares the core),
and how many pools fit in `--interval` at each mean (floor(interval / mean)); `--profile`
adds where one more pool's retrain spends its time, under cProfile. Local files only;
every loop is bounded.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import math
import os
import pstats
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.common import allowed_cpus, git_state, pin, say
from benchmarks.trace_files import all_trace_rows, resample
from devkit.synthetic import synthetic_rows
from shared.schemas import TrainingEntry
from shared.settings import TrainingSettings
from shared.slot import prior_slot
from shared.targets import TARGETS
from training_server.db import make_engine
from training_server.leadership import make_leadership
from training_server.metrics import TrainingMetrics
from training_server.migrate import upgrade
from training_server.pools import PoolRegistry, PoolRuntime
from training_server.retrain_record import Outcome
from training_server.store import SampleStore

MAX_POOLS = 1_000
MAX_ROWS = 100_000  # per pool
MAX_PASSES = 20

RowSource = Callable[[int, int], list[dict[str, Any]]]


def row_source(name: str) -> RowSource:
    """(count, seed) -> that many training rows: resampled H200 trace rows, or devkit's
    seeded simulator."""
    if name == "synthetic":
        return lambda count, seed: synthetic_rows(count, seed=seed)
    trace = all_trace_rows()
    return lambda count, seed: resample(trace, count, seed=seed)


def add_rows(runtime: PoolRuntime, rows: list[dict[str, Any]]) -> None:
    runtime.store.add_samples([TrainingEntry.model_validate(r) for r in rows])


def open_pools(
    workdir: Path, args: argparse.Namespace, source: RowSource
) -> tuple[PoolRegistry, list[PoolRuntime]]:
    """A fresh store and registry with `args.pools` pools of `args.rows` rows each."""
    url = f"sqlite:///{workdir / 'store.db'}"
    upgrade(url)
    engine = make_engine(url)
    settings = TrainingSettings(
        db_url=url,
        model_dir=workdir / "models",
        train_threads=1,
        retraining_interval_sec=args.interval,
        max_pools=args.pools + 1,  # the default pool counts
    )
    store = SampleStore(engine, test_ratio=settings.test_train_ratio)
    registry = PoolRegistry(
        settings, store, make_leadership(engine), prior_slot(settings), TrainingMetrics()
    )
    t0 = time.perf_counter()
    runtimes = []
    for i in range(args.pools):
        runtime = registry.open(f"pool-{i:04d}")
        add_rows(runtime, source(args.rows, 1_000 + i))
        runtimes.append(runtime)
    say(
        f"{args.pools} pools x {args.rows} rows ({args.source}) stored and opened in "
        f"{time.perf_counter() - t0:.1f} s; model {settings.model_type.value}, "
        f"{settings.n_estimators} trees, depth {settings.max_depth}, "
        f"{settings.train_threads} fitting thread"
    )
    return registry, runtimes


@dataclass
class PassTimes:
    """One pass: each pool's wall and CPU seconds (this process's), and the outcomes."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    outcomes: Counter[str] = field(default_factory=Counter)


def retrain_pass(runtimes: list[PoolRuntime], keep: bool = False) -> PassTimes:
    """Every pool's retrain once, in turn; `keep`: keeping each target's last model choice,
    as PoolsLoop asks when a pool's tick comes late (retrain.target.KeptChoice)."""
    times = PassTimes()
    for runtime in runtimes:
        t0, c0 = time.perf_counter(), time.process_time()
        outcome = runtime.retrainer.run_once(keep_choices=keep)
        times.wall.append(time.perf_counter() - t0)
        times.cpu.append(time.process_time() - c0)
        times.outcomes[outcome.value] += 1
    return times


def calibration_pass(runtimes: list[PoolRuntime]) -> float:
    """Every pool's live calibration tick once, in turn: seconds for all."""
    t0 = time.perf_counter()
    for runtime in runtimes:
        runtime.calibrator.tick()
    return time.perf_counter() - t0


def fits(interval: float, mean: float) -> int | None:
    return math.floor(interval / mean) if mean > 0 else None


def pass_line(label: str, times: PassTimes, calib: float | None, interval: float) -> str:
    ms = np.array(times.wall) * 1000.0
    wall, cpu = statistics.fmean(times.wall), statistics.fmean(times.cpu)
    return (
        f"{label:>6} {sum(times.wall):8.2f} {np.percentile(ms, 50):8.1f} "
        f"{np.percentile(ms, 90):8.1f} {ms.max():8.1f} {wall * 1000:8.1f} {cpu * 1000:8.1f} "
        f"{fits(interval, wall) or 0:>6d} {fits(interval, cpu) or 0:>5d} "
        f"{'-' if calib is None else f'{calib:.3f}':>7}  {dict(times.outcomes)}"
    )


def model_choices(runtimes: list[PoolRuntime]) -> str:
    """How often each candidate served each target in the pools' last retrains."""
    counts: Counter[str] = Counter()
    for runtime in runtimes:
        last = runtime.retrainer.state.last_success
        for target in TARGETS:
            choice = last.target(target).model_choice if last else None
            counts[f"{target.value}={choice}"] += 1
    return ", ".join(f"{k} x{n}" for k, n in sorted(counts.items()))


def run_passes(runtimes: list[PoolRuntime], args: argparse.Namespace, source: RowSource) -> None:
    say(
        f"\n{'pass':>6} {'total s':>8} {'p50 ms':>8} {'p90 ms':>8} {'max ms':>8} "
        f"{'mean ms':>8} {'cpu ms':>8} {'fit in ' + format(args.interval, 'g') + ' s':>12} "
        f"{'calib s':>7}  outcomes\n{'(wall / cpu)':>73}"
    )
    passes: list[PassTimes] = []
    for k in range(args.passes):
        if k:  # new rows in every pool, or its retrain would be skipped
            for i, runtime in enumerate(runtimes):
                add_rows(runtime, source(args.new_rows, 100_000 * k + i))
        # The loop keeps choices for a pool whose tick is late: after a pass longer than
        # the interval every pool waited longer than that for its turn.
        behind = bool(passes) and sum(passes[-1].wall) > args.interval and not args.no_keep
        passes.append(retrain_pass(runtimes, keep=behind))
        label = f"{k + 1}{'k' if behind else ''}"
        say(pass_line(label, passes[-1], calibration_pass(runtimes), args.interval))
    say(pass_line("skip", retrain_pass(runtimes), None, args.interval))
    wall = statistics.fmean([s for p in passes for s in p.wall])
    cpu = statistics.fmean([s for p in passes for s in p.cpu])
    totals = [sum(p.wall) for p in passes]
    say(
        f"\nall {args.passes} x {len(runtimes)} retrains: mean {wall * 1000:.1f} ms of wall "
        f"time per pool, {cpu * 1000:.1f} ms of CPU ({100 * cpu / wall:.0f} % of the core; "
        f"other work had the rest); a pass of {len(runtimes)} pools took "
        f"{min(totals):.2f}-{max(totals):.2f} s against the {args.interval:g} s interval "
        f"({'fits' if max(totals) <= args.interval else 'MISSES'}). Pools that fit in one "
        f"interval: {fits(args.interval, wall)} at the wall mean, {fits(args.interval, cpu)} "
        f"at the CPU mean (a core of its own)"
    )
    say(f"models served (last retrain of each pool): {model_choices(runtimes)}")


def profile_summary(profiler: cProfile.Profile) -> str:
    """Where a retrain's time goes, from the profile: calls and cumulative seconds of the
    retrain, the model choice, the model fits and xgboost's boosting rounds (each a
    prediction of the training rows for the custom objective, then one tree built)."""
    wanted = {
        ("loop.py", "run_once"): "retrain",
        ("select.py", "select"): "model choice (select)",
        ("fit.py", "fit_model"): "model fits",
        ("core.py", "update"): "boosting rounds",
        ("core.py", "predict"): "of which margin predictions",
        ("core.py", "train_one_iter"): "and tree building",
    }
    found: dict[str, tuple[int, float]] = {}
    stats: dict[Any, Any] = pstats.Stats(profiler).stats  # type: ignore[attr-defined]
    for (file, _line, func), (_cc, calls, _tt, cumulative, _callers) in stats.items():
        label = wanted.get((Path(file).name, func))
        if label is not None:
            found[label] = (calls, cumulative)
    return "; ".join(
        f"{label} {found[label][0]} calls {found[label][1]:.2f} s"
        for label in wanted.values()
        if label in found
    )


def profile_one(runtime: PoolRuntime, args: argparse.Namespace, source: RowSource) -> None:
    """One more retrain of one pool under cProfile: the top 10 by own and by total time."""
    add_rows(runtime, source(args.new_rows, 999_999))
    profiler = cProfile.Profile()
    profiler.enable()
    outcome = runtime.retrainer.run_once()
    profiler.disable()
    assert outcome is Outcome.OK, outcome
    say(f"\n## one retrain of {runtime.name} under cProfile: {profile_summary(profiler)}")
    for order in ("tottime", "cumulative"):
        out = io.StringIO()
        pstats.Stats(profiler, stream=out).sort_stats(order).print_stats(10)
        lines = out.getvalue().splitlines()
        start = next(i for i, line in enumerate(lines) if "ncalls" in line)
        say(f"\ntop 10 by {order}")
        for line in lines[start : start + 11]:
            say(line)


def bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not within {low}-{high}")
        return value

    return parse


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=bounded(1, MAX_POOLS), default=50)
    parser.add_argument("--rows", type=bounded(1, MAX_ROWS), default=1_000)
    parser.add_argument("--passes", type=bounded(1, MAX_PASSES), default=3)
    parser.add_argument("--new-rows", type=bounded(1, MAX_ROWS), default=100)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--source", choices=("traces", "synthetic"), default="traces")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument(
        "--no-keep", action="store_true", help="choose the model at every retrain, behind or not"
    )
    parser.add_argument("--cpu", type=int, help="the CPU to pin to (default: the first allowed)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    cpus = [args.cpu if args.cpu is not None else allowed_cpus()[0]]
    pin(os.getpid(), cpus)
    load = os.getloadavg()
    say(f"code {git_state()}; pinned to CPU {cpus}; load average {load[0]:.2f} {load[1]:.2f}")
    source = row_source(args.source)
    with tempfile.TemporaryDirectory(prefix="bench-pools-") as tmp:
        registry, runtimes = open_pools(Path(tmp), args, source)
        try:
            run_passes(runtimes, args, source)
            if args.profile:
                profile_one(runtimes[0], args, source)
        finally:
            registry.leadership.release()
            runtimes[0].store.engine.dispose()
    load = os.getloadavg()
    say(f"\nload average after: {load[0]:.2f} {load[1]:.2f}")


if __name__ == "__main__":
    main()
