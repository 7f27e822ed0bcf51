"""The event loop: arrivals, pod steps, completions; deterministic for a given input.

Events are request arrivals (routed by the policy on the pods' features at that instant)
and step ends (one pending per busy pod, ties broken by pod index). Nothing random happens
here: the workload's seed fixes the requests and the policy's seed its choices, so a run
is a pure function of both. With `speedup` set, simulated time is paced against wall time
(simulated seconds per wall second; a policy that asks a real predictor needs it), else
the run goes as fast as the CPU allows. With `regret` on (the default) every pick is also
judged by its decision regret (poolsim.regret: the chosen pod's look-ahead TTFT minus the
least any pod would have given), measured before the request reaches the pod.

A pool may change during the run (poolsim.pool_changes): pods that join later exist from
the start, after the initial ones, but a policy, the oracle and the regret meter see only
the pods live at each pick (always the first ones); slowdowns are events of their own,
applied before any arrival or step end at the same instant.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from poolsim.hardware import Hardware
from poolsim.pod import Pod
from poolsim.policy_api import Observation, PodFeatures, Policy, RequestInfo
from poolsim.pool_changes import PoolChanges, PoolTimeline
from poolsim.regret import RegretMeter
from poolsim.request import Completion, Request
from poolsim.sequence import Seq

Progress = Callable[[float], None]  # called with simulated seconds done, a few times a second


@dataclass(slots=True)
class RunResult:
    policy: str
    pods: list[Pod]
    completions: list[Completion]
    unfinished: list[Request]
    sim_end_s: float
    wall_s: float
    speedup: float | None
    policy_summary: dict[str, float] = field(default_factory=dict)
    seqs: list[Seq] = field(default_factory=list)  # finished, with their token accounting
    routes: list[tuple[float, int]] = field(default_factory=list)  # (arrival_s, pod) per pick
    regrets: list[tuple[float, float]] = field(default_factory=list)  # (arrival_s, regret ms)


class Engine:
    def __init__(
        self,
        requests: Sequence[Request],
        pods: int,
        hw: Hardware | Sequence[Hardware],
        policy: Policy,
        *,
        speedup: float | None = None,
        drain_limit_s: float | None = None,
        progress: Progress | None = None,
        regret: bool = True,
        changes: PoolChanges | None = None,
    ) -> None:
        """`hw`: one class for every pod, or each pod's class in pod order (a mixed pool,
        poolsim.hardware.parse_hardware); `pods` and `hw` are the initial pool, `changes`
        the pods that join it later and the slowdowns (poolsim.pool_changes)."""
        if pods < 1:
            raise ValueError("pods must be at least 1")
        if speedup is not None and speedup <= 0:
            raise ValueError("speedup must be positive")
        classes = [hw] * pods if isinstance(hw, Hardware) else list(hw)
        if len(classes) != pods:
            raise ValueError(f"{len(classes)} hardware classes for {pods} pods")
        self.changes = changes or PoolChanges()
        classes = self.changes.pool(classes)  # the joining pods after the initial ones
        self.timeline = PoolTimeline(self.changes, pods)
        distinct = list({c.name: c for c in classes}.values())
        for request in requests:
            for one in distinct:
                _check_fits(request, one)
        self.requests = sorted(requests, key=lambda r: (r.arrival_s, r.id))
        self.pods = [Pod(index, pod_hw) for index, pod_hw in enumerate(classes)]
        self.hw, self.policy, self.speedup, self.progress = classes[0], policy, speedup, progress
        last = self.requests[-1].arrival_s if self.requests else 0.0
        self.limit_s = drain_limit_s if drain_limit_s is not None else 3 * last + 600.0
        self._events: list[tuple[float, int]] = []
        self._features: dict[int, PodFeatures] = {}
        self.completions: list[Completion] = []
        self.finished: list[Seq] = []
        self.routes: list[tuple[float, int]] = []
        self.regret = RegretMeter() if regret else None
        self._wall0 = 0.0

    async def run(self) -> RunResult:
        self.policy.attach(self.pods, {r.id: r for r in self.requests})
        await self.policy.start(self.speedup)
        self._wall0 = time.perf_counter()
        next_report = 0.0
        now = 0.0
        try:
            index = 0
            while index < len(self.requests) or self._events:
                arrival = self.requests[index].arrival_s if index < len(self.requests) else None
                step = self._events[0][0] if self._events else None
                if self.timeline.slowdown_due(arrival, step):
                    now = self.timeline.apply_slowdown(self.pods)
                    continue
                if step is not None and (arrival is None or step <= arrival):
                    now, pod = heapq.heappop(self._events)
                    if now > self.limit_s:
                        break
                    await self._pace(now)
                    await self._step_end(self.pods[pod], now)
                else:
                    assert arrival is not None
                    now = arrival
                    await self._pace(now)
                    await self._arrive(self.requests[index], now)
                    index += 1
                if time.perf_counter() >= next_report:
                    if self.progress is not None:
                        self.progress(now)
                    next_report = time.perf_counter() + 0.2
                    # an unpaced run never waits otherwise: let the loop deliver a SIGTERM
                    await asyncio.sleep(0)
        finally:
            await self.policy.close()
        return self._result(now)

    async def _pace(self, now: float) -> None:
        if self.speedup is None:
            return
        ahead = now / self.speedup - (time.perf_counter() - self._wall0)
        if ahead > 0:
            await asyncio.sleep(ahead)

    async def _arrive(self, request: Request, now: float) -> None:
        live = self.pods[: self.timeline.live_count(now)]  # pods join in index order
        features = [pod_features(pod, request) for pod in live]
        info = RequestInfo(
            request.id,
            request.arrival_s,
            request.input_tokens,
            request.slo_ttft_ms,
            request.slo_tpot_ms,
            request.encoder_tokens,
        )
        choice = self.policy.choose(info, features, now)
        if inspect.isawaitable(choice):
            choice = await choice
        if not isinstance(choice, int) or not 0 <= choice < len(live):
            raise ValueError(f"policy {self.policy.name} chose pod {choice!r} of {len(live)}")
        if self.regret is not None:  # on the pods as the policy saw them
            self.regret.measure(live, request, choice, now)
        pod = live[choice]
        self.routes.append((request.arrival_s, pod.index))
        self._features[request.id] = features[choice]
        pod.submit(request, now)
        if pod.step_end_s is None:
            self._schedule(pod, now)

    def _schedule(self, pod: Pod, now: float) -> None:
        end = pod.start_step(now)
        if end is not None:
            heapq.heappush(self._events, (end, pod.index))

    async def _step_end(self, pod: Pod, now: float) -> None:
        _, finished = pod.finish_step(now)
        for seq in finished:
            done = self._completion(seq, pod.index)
            self.completions.append(done)
            self.finished.append(seq)
            seen = self.policy.observe(Observation(done, self._features.pop(seq.request.id)))
            if inspect.isawaitable(seen):
                await seen
        self._schedule(pod, now)

    def _completion(self, seq: Seq, pod: int) -> Completion:
        request = seq.request
        first, finish = seq.first_token_s, seq.finish_s
        assert first is not None and finish is not None
        overhead = self.pods[pod].hw.overhead_ms
        tpot = (
            (finish - first) * 1000.0 / (request.output_tokens - 1)
            if request.output_tokens > 1
            else None
        )
        return Completion(
            request=request,
            pod=pod,
            dispatch_s=seq.dispatch_s,
            first_token_s=first,
            finish_s=finish,
            ttft_ms=(first - request.arrival_s) * 1000.0 + overhead,
            tpot_ms=tpot,
            e2e_ms=(finish - request.arrival_s) * 1000.0 + overhead,
            prefix_hit_tokens=seq.first_hit_tokens,
            preemptions=seq.preemptions,
        )

    def _result(self, now: float) -> RunResult:
        done = {c.request.id for c in self.completions}
        return RunResult(
            policy=self.policy.name,
            pods=self.pods,
            completions=self.completions,
            unfinished=[r for r in self.requests if r.id not in done],
            sim_end_s=now,
            wall_s=time.perf_counter() - self._wall0,
            speedup=self.speedup,
            policy_summary=self.policy.summary(),
            seqs=self.finished,
            routes=self.routes,
            regrets=self.regret.regrets if self.regret is not None else [],
        )


def pod_features(pod: Pod, request: Request) -> PodFeatures:
    """The row the EPP would send for `pod` when scheduling `request` (built here, not by
    the pod, so the pod model stays below the policy interface)."""
    return PodFeatures(
        kv_cache_percentage=pod.kv_usage(),
        input_token_length=request.input_tokens,
        num_request_waiting=len(pod.waiting),
        num_request_running=pod.in_flight(),
        num_tokens_generated=1,
        prefill_tokens_in_flight=pod.prefill_pending_tokens,
        decode_tokens_in_flight=0,
        prefix_cache_score=pod.prefix_score(request),
        uncached_tokens_in_flight=pod.uncached_pending_tokens,
        pod_class=pod.hw.name,
        encoder_input_size=request.encoder_tokens,
        encoder_matched_size=pod.encoder.matched_tokens(request) if request.image_ids else 0,
    )


def _check_fits(request: Request, hw: Hardware) -> None:
    if request.input_tokens < 1 or request.output_tokens < 1:
        raise ValueError(f"request {request.id}: input and output tokens must be >= 1")
    total = request.input_tokens + request.output_tokens
    if total > hw.max_model_len:
        raise ValueError(
            f"request {request.id}: {total} tokens exceed max_model_len "
            f"{hw.max_model_len} of {hw.name}"
        )


def simulate(
    requests: Sequence[Request],
    pods: int,
    hw: Hardware | Sequence[Hardware],
    policy: Policy,
    **options: float | bool | Progress | None,
) -> RunResult:
    """Run one simulation to completion (asyncio.run around Engine.run)."""
    engine = Engine(requests, pods, hw, policy, **options)  # type: ignore[arg-type]
    return asyncio.run(engine.run())
