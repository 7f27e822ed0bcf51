"""Why a policy wins or loses on a workload: per-request diagnostics of one seed.

    .venv/bin/python -m benchmarks.poolsim_why --workload prefix [--seed 0]
        [--policies heuristic,predicted-latency,oracle] [--pods 8] [--duration 300]
        [--speedup 5] [--hardware h200]

One run per policy (predicted-latency starts our servers, as `simulate` does), then:
- warm-up: TTFT p90 and SLO attainment of the requests arriving in each 60 s window;
- prefix groups: the share of requests that found less than half of their group's
  shared prefix in the chosen pod's cache (a miss: the prefix is prefilled again), TTFT
  p90 of hits and of misses, and over how many pods each group was spread
  (request-weighted mean);
- what the chosen pod looked like at dispatch, per TTFT SLO class: prompt tokens still
  to prefill there (`prefill_tokens_in_flight`) and its queue, means;
- predicted-latency: its picks per scorer rule ("ttft_negative": no pod was predicted to
  meet the TTFT SLO), and for the requests it sent to a pod with nothing to prefill, per
  TTFT SLO class, the measured TTFT p50 / p90 against the p90 it acted on.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
from collections import defaultdict
from collections.abc import Awaitable, Mapping, Sequence

import numpy as np

from benchmarks.common import say
from poolsim.engine import Engine, RunResult
from poolsim.hardware import hardware
from poolsim.pod import Pod
from poolsim.policies import make_policy
from poolsim.policy_api import Observation, PodFeatures, Policy, PolicyOptions, RequestInfo
from poolsim.predicted import PredictedLatencyPolicy
from poolsim.request import Completion, Request
from poolsim.workloads import generate

WINDOW_S = 60.0


class Recording:
    """A policy that records the features each request was dispatched on."""

    def __init__(self, inner: Policy) -> None:
        self.inner = inner
        self.name, self.paced = inner.name, inner.paced
        self.dispatched: dict[int, PodFeatures] = {}
        self.served: dict[int, float] = {}  # predicted-latency: the TTFT p90 acted on

    def attach(self, pods: Sequence[Pod], requests: Mapping[int, Request]) -> None:
        self.inner.attach(pods, requests)

    async def start(self, speedup: float | None) -> None:
        await self.inner.start(speedup)

    def choose(
        self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float
    ) -> int | Awaitable[int]:
        return self.inner.choose(request, pods, now_s)

    def observe(self, observation: Observation) -> Awaitable[None] | None:
        request_id = observation.completion.request.id
        self.dispatched[request_id] = observation.features
        if isinstance(self.inner, PredictedLatencyPolicy):
            pending = self.inner.pending.get((request_id, observation.features.pod_type))
            acted = pending[0] if pending is not None else None
            if acted is not None:
                self.served[request_id] = acted.ttft_ms
        return self.inner.observe(observation)

    async def close(self) -> None:
        await self.inner.close()

    def summary(self) -> dict[str, float]:
        return self.inner.summary()


def p90(values: Sequence[float]) -> float:
    return float(np.percentile(values, 90)) if values else float("nan")


def windows(done: Sequence[Completion]) -> str:
    cells = []
    last = max(c.request.arrival_s for c in done)
    for start in np.arange(0.0, last, WINDOW_S):
        part = [c for c in done if start <= c.request.arrival_s < start + WINDOW_S]
        if part:
            met = statistics.mean(c.slo_met for c in part)
            cells.append(f"{p90([c.ttft_ms for c in part]):,.0f} / {met:.0%}")
    return "; ".join(cells)


def prefix_figures(done: Sequence[Completion], block: int) -> str:
    grouped = [c for c in done if c.request.prefix_group is not None]
    if not grouped:
        return "- | - | -"
    hits: list[float] = []
    misses: list[float] = []
    pods: dict[int, set[int]] = defaultdict(set)
    for c in grouped:
        shared = c.request.shared_blocks(block) * block
        (hits if c.prefix_hit_tokens >= shared / 2 else misses).append(c.ttft_ms)
        pods[c.request.prefix_group or 0].add(c.pod)
    spread = statistics.mean(len(pods[c.request.prefix_group or 0]) for c in grouped)
    return (
        f"{len(misses) / len(grouped):.1%} | {p90(hits):,.0f} / {p90(misses):,.0f} | {spread:.1f}"
    )


def dispatch_figures(done: Sequence[Completion], seen: Mapping[int, PodFeatures]) -> str:
    classes: dict[str, list[PodFeatures]] = defaultdict(list)
    for c in done:
        slo = c.request.slo_ttft_ms
        classes["none" if slo is None else f"{slo:g}"].append(seen[c.request.id])
    return "; ".join(
        f"{key}: {statistics.mean(f.prefill_tokens_in_flight for f in rows):,.0f} tok, "
        f"queue {statistics.mean(f.num_request_waiting for f in rows):.1f}"
        for key, rows in sorted(classes.items(), key=lambda kv: float(kv[0]))
    )


def served_on_idle_pods(
    done: Sequence[Completion], seen: Mapping[int, PodFeatures], served: Mapping[int, float]
) -> str:
    """Requests sent to a pod with no prompt waiting for prefill, per TTFT SLO class: how
    many, their measured TTFT p50 / p90, the median p90 served for them, its coverage."""
    classes: dict[str, list[Completion]] = defaultdict(list)
    for c in done:
        if c.request.id in served and seen[c.request.id].prefill_tokens_in_flight == 0:
            slo = c.request.slo_ttft_ms
            classes["none" if slo is None else f"{slo:g}"].append(c)
    cells = []
    for key, rows in sorted(classes.items(), key=lambda kv: float(kv[0])):
        actual = [c.ttft_ms for c in rows]
        p90s = [served[c.request.id] for c in rows]
        covered = statistics.mean(c.ttft_ms <= served[c.request.id] for c in rows)
        cells.append(
            f"{key}: n {len(rows)}, measured {np.percentile(actual, 50):,.0f} / {p90(actual):,.0f}"
            f", served p90 {statistics.median(p90s):,.0f} (coverage {covered:.2f})"
        )
    return "; ".join(cells)


def run_one(name: str, requests: list[Request], args: argparse.Namespace) -> None:
    options = PolicyOptions(seed=args.seed, speedup=args.speedup)
    policy = Recording(make_policy(name, args.seed, options=options))
    hw = hardware(args.hardware)
    engine = Engine(requests, args.pods, hw, policy, speedup=args.speedup if policy.paced else None)
    result: RunResult = asyncio.run(engine.run())
    done = result.completions
    say(
        f"| {name} | {windows(done)} | {prefix_figures(done, hw.block_size)} "
        f"| {dispatch_figures(done, policy.dispatched)} |"
    )
    if policy.served:
        rules = {k[5:]: int(v) for k, v in result.policy_summary.items() if k.startswith("rule_")}
        say(
            f"|  | picks by scorer rule: {rules} |  |  |  | on pods with nothing to prefill: "
            f"{served_on_idle_pods(done, policy.dispatched, policy.served)} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workload", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--policies", default="heuristic,predicted-latency,oracle")
    parser.add_argument("--pods", type=int, default=8)
    parser.add_argument("--duration", type=float, default=300.0)
    parser.add_argument("--speedup", type=float, default=5.0)
    parser.add_argument("--hardware", default="h200")
    args = parser.parse_args()
    requests = generate(args.workload, args.pods, args.duration, args.seed)
    say(f"### {args.workload}, seed {args.seed}, {args.pods} pods, {args.duration:g} s\n")
    say(
        "| policy | TTFT p90 ms / SLO met per 60 s window | prefix misses | TTFT p90 hit / miss"
        " ms | pods per group | chosen pod at dispatch, per TTFT SLO class |"
    )
    say("|---|---|---|---|---|---|")
    for name in args.policies.split(","):
        run_one(name, requests, args)


if __name__ == "__main__":
    main()
