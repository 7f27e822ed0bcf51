"""Many pools under the real retrain loop: how long does each pool wait between retrains?

    .venv/bin/python -m benchmarks.bench_pools_loop [--pools 50] [--rows 1000]
        [--new-rows 100] [--interval 10] [--seconds 90] [--source traces|synthetic]

The same store and pools as bench_pools (its open_pools), then PoolsLoop's own pass
(run_due) driven on this thread, pinned to one CPU, for `--seconds` of wall time while
every pool gets `--new-rows` new rows every `--interval` seconds, as EPPs would send them.
The loop decides, pool by pool, when to retrain and whether a late pool keeps its last
model choice (retrain.target.KeptChoice). Read back from the retrains table: per pool, the
gaps between its retrains once every pool has its first model (the first pass chooses
every pool's model: a backlog, not the steady state), their p50 / p90 / max over all
pools, the retrains per pool, how many kept their choice, the mean duration of a retrain
that chose and of one that kept; the first pass's duration (from the first tick to the
end of the last pool's first retrain); and the highest 1-minute load average sampled at
every new batch of rows (other work on the machine slows the pass). Goals: the first pass
within 15 s at 50 pools, every pool retrains within one interval. Local files only;
bounded in time and count.
"""

from __future__ import annotations

import argparse
import itertools
import os
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from benchmarks.bench_pools import add_rows, bounded, open_pools, row_source
from benchmarks.common import allowed_cpus, pin, say
from training_server.pools import PoolRuntime
from training_server.retrain.loop import PoolsLoop
from training_server.retrain_record import RetrainRecord

MAX_SECONDS = 600.0
MAX_RUN_DUE_CALLS = 1_000_000


def drive(loop: PoolsLoop, runtimes: list[PoolRuntime], args: argparse.Namespace) -> list[float]:
    """Run the loop's passes for args.seconds, new rows every interval; returns the 1-minute
    load average at the start and at every new batch."""
    source = row_source(args.source)
    loads = [os.getloadavg()[0]]
    start = time.monotonic()
    end, next_rows, batch = start + args.seconds, start + args.interval, 0
    for _ in range(MAX_RUN_DUE_CALLS):
        now = time.monotonic()
        if now >= end:
            break
        if now >= next_rows:
            batch += 1
            for i, runtime in enumerate(runtimes):
                add_rows(runtime, source(args.new_rows, 10_000 * batch + i))
            next_rows += args.interval
            loads.append(os.getloadavg()[0])
        wait = loop.run_due()
        time.sleep(max(0.0, min(wait, 0.05, end - time.monotonic())))
    return loads


def starts(records: list[RetrainRecord]) -> list[float]:
    return sorted(r.started_at.timestamp() for r in records if r.status == "ok")


def kept_choice(record: RetrainRecord) -> bool:
    """The retrain kept each target's last choice (it scored no candidate)."""
    return bool(record.model_candidates) and not any((record.model_candidates or {}).values())


def first_pass(history: list[list[RetrainRecord]], started: float) -> float:
    """Seconds from the loop's first tick (`started`, epoch) to the end of the last pool's
    first retrain."""
    ends = []
    for records in history:
        ok = sorted((r for r in records if r.status == "ok"), key=lambda r: r.started_at)
        ends.append(ok[0].started_at.timestamp() + ok[0].duration_s)
    return max(ends) - started


def durations(history: list[list[RetrainRecord]], kept: bool) -> str:
    seconds = [
        r.duration_s for rs in history for r in rs if r.status == "ok" and kept_choice(r) == kept
    ]
    return f"{len(seconds)} x {np.mean(seconds):.3f} s" if seconds else "none"


def report(
    runtimes: list[PoolRuntime], args: argparse.Namespace, started: float, loads: list[float]
) -> None:
    """Gaps between each pool's retrains once every pool has its first model (the first
    pass chooses every pool's model at once: a backlog, not the steady state)."""
    history = [runtime.store.list_retrains(limit=10_000) for runtime in runtimes]
    steady = max(starts(records)[0] for records in history)
    all_gaps: list[float] = []
    retrains, kept = [], 0
    for records in history:
        retrains.append(len(starts(records)))
        kept += sum(1 for r in records if kept_choice(r))
        after = [s for s in starts(records) if s >= steady]
        all_gaps.extend(b - a for a, b in itertools.pairwise(after))
    g = np.array(all_gaps) if all_gaps else np.array([float("nan")])
    say(
        f"\n{len(runtimes)} pools, {args.seconds:g} s under the loop, rows every "
        f"{args.interval:g} s: {sum(retrains)} retrains ({min(retrains)}-{max(retrains)} per "
        f"pool), {kept} of them kept the last model choice\n"
        f"gap between a pool's retrains once every pool has its first model: p50 "
        f"{np.percentile(g, 50):.1f} s, p90 {np.percentile(g, 90):.1f} s, max {g.max():.1f} s "
        f"against the {args.interval:g} s interval "
        f"({'within' if g.max() <= args.interval * 1.5 else 'NOT within'} 1.5 intervals)\n"
        f"first pass (every pool's first model): {first_pass(history, started):.1f} s; "
        f"retrains that chose: {durations(history, False)}, that kept: {durations(history, True)}"
        f"\n1-minute load average during the run (at each batch): max {max(loads):.2f}, "
        f"{' '.join(f'{v:.2f}' for v in loads)}"
    )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pools", type=bounded(1, 500), default=50)
    parser.add_argument("--rows", type=bounded(1, 100_000), default=1_000)
    parser.add_argument("--new-rows", type=bounded(1, 100_000), default=100)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--seconds", type=float, default=90.0)
    parser.add_argument("--source", choices=("traces", "synthetic"), default="traces")
    args = parser.parse_args()
    if not 0 < args.seconds <= MAX_SECONDS:
        parser.error(f"--seconds must be within 0-{MAX_SECONDS:g}")
    return args


def main() -> None:
    args = parse_args()
    pin(os.getpid(), [allowed_cpus()[0]])
    with tempfile.TemporaryDirectory(prefix="bench-pools-loop-") as tmp:
        registry, runtimes = open_pools(Path(tmp), args, row_source(args.source))
        loop = PoolsLoop(
            lambda: runtimes,
            registry.leadership,
            calibration_interval_sec=registry.settings.calibration_interval_sec,
            wake=threading.Event(),
        )
        try:
            started = time.time()
            loads = drive(loop, runtimes, args)
            report(runtimes, args, started, loads)
        finally:
            registry.leadership.release()
            runtimes[0].store.engine.dispose()
    load = os.getloadavg()
    say(f"load average after: {load[0]:.2f} {load[1]:.2f}")


if __name__ == "__main__":
    main()
