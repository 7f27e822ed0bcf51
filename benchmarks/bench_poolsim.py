"""The simulated pool: capacity per workload, and the policy comparison table.

    .venv/bin/python -m benchmarks.bench_poolsim capacity [--seconds 120]
    .venv/bin/python -m benchmarks.bench_poolsim compare [--workloads chat,prefix,mixed,ramp]
        [--seeds 0,1,2] [--pods 8] [--duration 600] [--policies ...] [--out DIR] [--jobs 1]
        [--hardware h200|b200|h200:4,b200:4] [--speedup S]

`capacity`: one pod (h200) fed each workload's request mix at a rate it cannot keep up
with; the completions per second it sustains are its saturation throughput (the figure
poolsim.workloads.RATE_PER_POD was set from). No routing policy is involved.

`compare`: `latency-predictor simulate` per workload and seed (by default the four of the
published tables; `multimodal` only when --workloads names it; JSON under --out,
default benchmarks/results/poolsim), then per workload a Markdown table of each policy's
mean over the seeds (and the min-max of TTFT p90 and SLO attainment across seeds), with
the wall time per run; for `predicted-latency` (our servers, started by each run) the
served p90s' coverage and pinball and its warm-up, per TTFT SLO class where a workload
has several, per hardware class for a mixed pool (`--hardware h200:4,b200:4`: --pods is
then the counts' sum), and the goal check (benchmarks/poolsim_goals.py). Timing figures
depend on the machine's load: `uptime` is printed.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import time
from dataclasses import replace
from pathlib import Path

from benchmarks.common import say, simulate_command
from benchmarks.poolsim_goals import goal_check, summary_table
from benchmarks.poolsim_tables import (
    Doc,
    pod_class_table,
    served_table,
    slo_class_table,
    table,
)
from poolsim.engine import Engine
from poolsim.hardware import H200, HardwareSpecError, parse_hardware
from poolsim.policies import make_policy
from poolsim.workloads import RATE_PER_POD, WORKLOADS, generate

ROOT = Path(__file__).resolve().parents[1]
POLICIES = "round-robin,least-requests,heuristic,token-load,latency-first,oracle"


CAPACITY_CASES = (  # workload, pods' worth of groups, rate multiple, what it stands for
    ("chat", 1, 4.0, ""),
    ("mixed", 1, 4.0, ""),
    ("prefix", 1, 24.0, "its own 12 groups (perfect affinity)"),
    ("prefix", 8, 8.0, "all 96 groups of 8 pods (no affinity)"),
    ("multimodal", 1, 4.0, "its own 200 images (perfect affinity)"),
    ("multimodal", 8, 8.0, "all 1,600 images of 8 pods (no affinity)"),
)
# compare's default: the four workloads of the published tables (multimodal: --workloads)
COMPARED = "chat,prefix,mixed,ramp"


def capacity(seconds: float) -> None:
    """Saturation throughput of one pod per workload mix: arrivals far above what it can
    serve for `seconds`, completions counted from second 20 to the end of arrivals."""
    say(
        "| workload | offered req/s | sustained req/s (one pod, saturated) | table rate per pod "
        "| table rate / sustained |"
    )
    say("|---|---|---|---|---|")
    for name, groups_of, multiple, note in CAPACITY_CASES:
        made = generate(name, groups_of, seconds * multiple / groups_of, 0)
        squeeze = multiple / groups_of
        reqs = [replace(r, arrival_s=r.arrival_s / squeeze) for r in made]
        engine = Engine(reqs, 1, H200, make_policy("round-robin", 0), drain_limit_s=seconds)
        result = asyncio.run(engine.run())
        done = [c for c in result.completions if 20.0 <= c.finish_s <= seconds]
        sustained = len(done) / (seconds - 20.0)
        label = f"{name}, {note}" if note else name
        say(
            f"| {label} | {len(reqs) / seconds:.2f} | {sustained:.2f} | {RATE_PER_POD[name]} "
            f"| {RATE_PER_POD[name] / sustained:.0%} |"
        )


def _run(workload: str, seed: int, args: argparse.Namespace, out: Path) -> subprocess.Popen[bytes]:
    target = out / f"{workload}-seed{seed}.json"
    command = simulate_command(
        workload,
        seed,
        args.duration,
        args.policies,
        target,
        *("--pods", str(args.pods), "--hardware", args.hardware),
    )
    if args.speedup is not None:
        command += ["--speedup", str(args.speedup)]
    if seed == 0:
        command += ["--plots", str(out / f"{workload}-plots")]
    return subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)


def compare(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    say(f"uptime: {os.getloadavg()} (1, 5, 15 min load)")
    jobs = [(w, int(s)) for w in args.workloads.split(",") for s in args.seeds.split(",")]
    running: list[subprocess.Popen[bytes]] = []
    for workload, seed in jobs:
        if not args.table_only:
            running.append(_run(workload, seed, args, out))
            if len(running) >= args.jobs:
                running.pop(0).wait(timeout=3600)
    for process in running:
        process.wait(timeout=3600)
    runs: dict[str, list[Doc]] = {}
    for workload in args.workloads.split(","):
        docs = [
            json.loads((out / f"{workload}-seed{s}.json").read_text())
            for s in args.seeds.split(",")
        ]
        runs[workload] = docs
        say(
            f"\n### {workload} ({args.pods} pods, {args.duration:g} s, seeds {args.seeds}; "
            f"{docs[0]['requests']:,} requests in seed {args.seeds.split(',')[0]})\n"
        )
        say(table(docs))
        for title, part in (
            ("Served p90s of the predicted policy, warm-up, holds", served_table(docs)),
            ("By TTFT SLO class (means over the seeds)", slo_class_table(docs)),
            (
                "By hardware class: TTFT p90 ms / SLO met / share / served TTFT coverage "
                "(means over the seeds)",
                pod_class_table(docs),
            ),
            ("Goal check (means over the seeds)", goal_check(docs)),
        ):
            if part:
                say(f"\n{title}:\n\n{part}")
    if all("latency-first" in docs[0]["policies"] for docs in runs.values()):
        say(f"\n### The goal, per workload\n\n{summary_table(runs)}")
    say(f"uptime: {os.getloadavg()}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    cap = sub.add_parser("capacity")
    cap.add_argument("--seconds", type=float, default=120.0)
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("--workloads", default=COMPARED, help=f"of {', '.join(WORKLOADS)}")
    cmp_.add_argument("--seeds", default="0,1,2")
    cmp_.add_argument("--pods", type=int, help="8; with --hardware counts, their sum")
    cmp_.add_argument("--duration", type=float, default=600.0)
    cmp_.add_argument("--policies", default=POLICIES)
    cmp_.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "poolsim"))
    cmp_.add_argument("--jobs", type=int, default=1, help="simulations at once")
    cmp_.add_argument(
        "--hardware",
        default="h200",
        help="h200 (calibrated), b200, or a mixed pool such as h200:4,b200:4",
    )
    cmp_.add_argument(
        "--speedup", type=float, help="for predicted-latency (default: the command's)"
    )
    cmp_.add_argument("--table-only", action="store_true", help="tables from existing JSON")
    args = parser.parse_args()
    if args.mode == "compare":
        try:
            args.pods = len(parse_hardware(args.hardware, args.pods))
        except HardwareSpecError as exc:
            parser.error(str(exc))
    started = time.perf_counter()
    if args.mode == "capacity":
        capacity(args.seconds)
    else:
        compare(args)
    say(f"total wall {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
