"""P/D pools (`simulate --roles`): their capacity, sized before any policy is compared.

    .venv/bin/python -m benchmarks.pd_bench capacity [--workloads chat,mixed] [--seconds 120]
    .venv/bin/python -m benchmarks.pd_bench compare [--workloads mixed,chat] [--seeds 0,1,2]
        [--duration 300] [--policies ...] [--out DIR] [--table-only]

`capacity` applies the rule the monolithic workloads' rates were set by
(benchmarks.bench_poolsim capacity: a workload runs at about two thirds of what the pods
sustain when saturated) to a P/D pool of 8 pods. For each prefill:decode split of 8 pods
it feeds the pool the workload at `--offered` times the rate set for 8 monolithic pods,
routed by `pd-heuristic` (llm-d's sample P/D profiles, the baseline; no predictor) with
the decider at 16 tokens, and counts the completions per second from second 20 to the
end of arrivals: the split's saturation throughput. The split that sustains the most is
the one whose prefill and decode capacities match the workload's prefill and decode
work (among the splits with at least two pods of each role: a profile of one pod makes
no choice, so it would leave nothing to compare); the scenario's rate is then 2/3 of
that split's throughput, given to `simulate` as `--rate-scale` (the table rate times
it). Only the baseline runs here, so no routing result of a predicted policy can feed
the choice.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import time
from pathlib import Path

from benchmarks.common import say, simulate_command
from benchmarks.pd_tables import goal_table, role_table
from benchmarks.poolsim_tables import table
from poolsim.engine import Engine
from poolsim.hardware import H200
from poolsim.policies import make_policy
from poolsim.roles import DECODE, PREFILL, PdConfig
from poolsim.workloads import RATE_PER_POD, generate

ROOT = Path(__file__).resolve().parents[1]
PODS = 8
# workload -> (roles, --rate-scale): from `capacity` (2026-12-05; benchmarks/README.md,
# P/D disaggregation), set before any policy was compared on a P/D pool
SCENARIOS = {"chat": ("prefill:4,decode:4", 1.05), "mixed": ("prefill:6,decode:2", 0.77)}
POLICIES = "pd-heuristic,token-load,predicted-latency,latency-first,oracle"
MIN_PER_ROLE = 2  # a profile of one pod leaves its pick nothing to choose
TARGET = 2 / 3  # of the saturation throughput: the monolithic rule (chat 62 %, mixed 69 %)


def sustained(workload: str, prefill: int, offered: float, seconds: float) -> float:
    """Completions per second of a saturated P/D pool with `prefill` prefill pods."""
    roles = (PREFILL,) * prefill + (DECODE,) * (PODS - prefill)
    requests = generate(workload, PODS, seconds, 0, offered)
    engine = Engine(
        requests,
        PODS,
        H200,
        make_policy("pd-heuristic", 0),
        drain_limit_s=seconds,
        regret=False,
        pd=PdConfig(roles),
    )
    result = asyncio.run(engine.run())
    done = [c for c in result.completions if 20.0 <= c.finish_s <= seconds]
    return len(done) / (seconds - 20.0)


def capacity(workloads: list[str], seconds: float, offered: float) -> None:
    say(
        "| workload | split | offered req/s | sustained req/s (8 pods, saturated) "
        "| of 8 monolithic pods' table rate |"
    )
    say("|---|---|---|---|---|")
    for workload in workloads:
        table_rate = RATE_PER_POD[workload] * PODS
        best = (0.0, 0)
        for prefill in range(1, PODS):
            rate = sustained(workload, prefill, offered, seconds)
            if MIN_PER_ROLE <= prefill <= PODS - MIN_PER_ROLE:
                best = max(best, (rate, prefill))
            say(
                f"| {workload} | prefill:{prefill},decode:{PODS - prefill} "
                f"| {table_rate * offered:.1f} | {rate:.2f} | {rate / table_rate:.0%} |"
            )
        rate, prefill = best
        say(
            f"| **{workload}** | **prefill:{prefill},decode:{PODS - prefill}** | | "
            f"2/3 of {rate:.2f} = {TARGET * rate:.2f} req/s | "
            f"**--rate-scale {TARGET * rate / table_rate:.2f}** |"
        )


def _run(workload: str, seed: int, args: argparse.Namespace, out: Path) -> None:
    roles, scale = SCENARIOS[workload]
    command = simulate_command(
        workload,
        seed,
        args.duration,
        args.policies,
        out / f"{workload}-seed{seed}.json",
        *("--roles", roles, "--rate-scale", str(scale)),
    )
    subprocess.run(command, cwd=ROOT, stdout=subprocess.DEVNULL, check=True, timeout=3600)


def compare(args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    seeds = [int(s) for s in args.seeds.split(",")]
    for workload in args.workloads.split(","):
        if not args.table_only:
            for seed in seeds:
                _run(workload, seed, args, out)
        docs = [json.loads((out / f"{workload}-seed{s}.json").read_text()) for s in seeds]
        roles, scale = SCENARIOS[workload]
        say(
            f"\n##### {workload}, {roles}, --rate-scale {scale} ({args.duration:g} s, seeds "
            f"{args.seeds}; {docs[0]['requests']:,} requests in seed {seeds[0]})\n"
        )
        say(table(docs))
        say(f"\nPer role (means over the seeds):\n\n{role_table(docs)}")
        say(f"\nGoal check:\n\n{goal_table(docs)}")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="mode", required=True)
    cap = sub.add_parser("capacity")
    cap.add_argument("--workloads", default="chat,mixed")
    cap.add_argument("--seconds", type=float, default=120.0)
    cap.add_argument(
        "--offered", type=float, default=3.0, help="x the 8 monolithic pods' table rate (3)"
    )
    cmp_ = sub.add_parser("compare")
    cmp_.add_argument("--workloads", default="mixed,chat")
    cmp_.add_argument("--seeds", default="0,1,2")
    cmp_.add_argument("--duration", type=float, default=300.0)
    cmp_.add_argument("--policies", default=POLICIES)
    cmp_.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "pd"))
    cmp_.add_argument("--table-only", action="store_true", help="tables from existing JSON")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.mode == "capacity":
        capacity(args.workloads.split(","), args.seconds, args.offered)
    else:
        compare(args)
    say(f"total wall {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
