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

A prefill/decode pool (`pd`, poolsim.roles) routes each arrival as llm-d's picker runs
its profiles: the policy picks a decode pod among the live decode pods, the decider
reads that pod's prefix cache, and a split request gets a prefill pod from a second
pick among the prefill pods (poolsim.disagg follows it through prefill, KV transfer and
decode; transfer ends are events too, applied before step ends and arrivals at the same
instant). Its decision regret is measured on the pick that sets its TTFT most: the
prefill pick (look-ahead prefill end among the prefill pods) for a split request, the
decode pick (look-ahead TTFT among the decode pods) otherwise.
"""

from __future__ import annotations

import asyncio
import heapq
import inspect
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

from poolsim.disagg import PdFlow, PdRoute, comes_first
from poolsim.hardware import Hardware
from poolsim.pod import Pod
from poolsim.policy_api import Observation, PodFeatures, Policy, RequestInfo
from poolsim.pool_changes import PoolChanges, PoolTimeline
from poolsim.regret import RegretMeter
from poolsim.request import Completion, Request
from poolsim.roles import DECODE, PREFILL, PdConfig
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
    pd: PdConfig | None = None  # a P/D pool's roles and settings (None: monolithic)
    pd_routes: dict[int, PdRoute] = field(default_factory=dict)  # P/D: request id -> route


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
        pd: PdConfig | None = None,
    ) -> None:
        """`hw`: one class for every pod, or each pod's class in pod order (a mixed pool,
        poolsim.hardware.parse_hardware); `pods` and `hw` are the initial pool, `changes`
        the pods that join it later and the slowdowns (poolsim.pool_changes); `pd` makes
        it a prefill/decode pool (one role per pod; no joins)."""
        if pods < 1:
            raise ValueError("pods must be at least 1")
        if speedup is not None and speedup <= 0:
            raise ValueError("speedup must be positive")
        classes = [hw] * pods if isinstance(hw, Hardware) else list(hw)
        if len(classes) != pods:
            raise ValueError(f"{len(classes)} hardware classes for {pods} pods")
        self.changes = changes or PoolChanges()
        classes = self.changes.pool(classes)  # the joining pods after the initial ones
        roles = list(pd.roles) if pd is not None else [""] * len(classes)
        if len(roles) != len(classes):
            raise ValueError(f"{len(roles)} roles for {len(classes)} pods (joins included)")
        self.timeline = PoolTimeline(self.changes, pods)
        distinct = list({c.name: c for c in classes}.values())
        for request in requests:
            for one in distinct:
                _check_fits(request, one)
        self.requests = sorted(requests, key=lambda r: (r.arrival_s, r.id))
        pairs = enumerate(zip(classes, roles, strict=True))
        self.pods = [Pod(i, pod_hw, role=role) for i, (pod_hw, role) in pairs]
        self.pd = PdFlow(pd) if pd is not None else None
        self.hw, self.policy, self.speedup, self.progress = classes[0], policy, speedup, progress
        last = self.requests[-1].arrival_s if self.requests else 0.0
        self.limit_s = drain_limit_s if drain_limit_s is not None else 3 * last + 600.0
        self._events: list[tuple[float, int]] = []
        self._features: dict[int, tuple[PodFeatures, ...]] = {}  # per pod of its route
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
            while index < len(self.requests) or self._events or self._transferring():
                arrival = self.requests[index].arrival_s if index < len(self.requests) else None
                step = self._events[0][0] if self._events else None
                moved = self.pd.next_transfer_s() if self.pd is not None else None
                if self.timeline.slowdown_due(arrival, step, moved):
                    now = self.timeline.apply_slowdown(self.pods)
                    continue
                if moved is not None and comes_first(moved, step, arrival):
                    now = moved
                    if now > self.limit_s:
                        break
                    await self._pace(now)
                    self._transfer_done(now)
                elif step is not None and (arrival is None or step <= arrival):
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

    def _transferring(self) -> bool:
        return self.pd is not None and self.pd.pending()

    async def _arrive(self, request: Request, now: float) -> None:
        live = self.pods[: self.timeline.live_count(now)]  # pods join in index order
        info = RequestInfo(
            request.id,
            request.arrival_s,
            request.input_tokens,
            request.slo_ttft_ms,
            request.slo_tpot_ms,
            request.encoder_tokens,
        )
        if self.pd is not None:
            await self._arrive_pd(request, info, live, now)
            return
        choice, features = await self._pick(info, live, request, now)
        self._send(request, live, choice, (features[choice],), now)

    async def _pick(
        self, info: RequestInfo, candidates: Sequence[Pod], request: Request, now: float
    ) -> tuple[int, list[PodFeatures]]:
        """The policy's pick among `candidates` (an index into them), and their features."""
        features = [pod_features(pod, request) for pod in candidates]
        choice = self.policy.choose(info, features, now)
        if inspect.isawaitable(choice):
            choice = await choice
        if not isinstance(choice, int) or not 0 <= choice < len(candidates):
            raise ValueError(f"policy {self.policy.name} chose pod {choice!r} of {len(candidates)}")
        return choice, features

    def _send(
        self,
        request: Request,
        candidates: Sequence[Pod],
        choice: int,
        features: tuple[PodFeatures, ...],
        now: float,
    ) -> None:
        """Submit `request` to the chosen pod, after measuring the pick's regret on the
        candidates as the policy saw them."""
        if self.regret is not None:
            self.regret.measure(candidates, request, choice, now)
        self.routes.append((request.arrival_s, candidates[choice].index))
        self._features[request.id] = features
        self._submit(candidates[choice], request, now)

    async def _arrive_pd(
        self, request: Request, info: RequestInfo, live: Sequence[Pod], now: float
    ) -> None:
        """llm-d's P/D profiles: decode pick, decider on that pod, prefill pick if split."""
        assert self.pd is not None
        decoders = [pod for pod in live if pod.role == DECODE]
        prefillers = [pod for pod in live if pod.role == PREFILL]
        d, d_features = await self._pick(replace(info, profile=DECODE), decoders, request, now)
        decode = decoders[d]
        if not prefillers or not self.pd.splits(request, decode):
            self.pd.route_whole(request, decode.index)
            self._send(request, decoders, d, (d_features[d],), now)
            return
        p, p_features = await self._pick(replace(info, profile=PREFILL), prefillers, request, now)
        stage = self.pd.route_split(request, prefillers[p].index, decode.index)
        self._send(stage, prefillers, p, (p_features[p], d_features[d]), now)
        self.routes.append((request.arrival_s, decode.index))

    def _transfer_done(self, now: float) -> None:
        """A split request's KV reached its decode pod: it joins that pod's queue."""
        assert self.pd is not None
        request, index = self.pd.pop_transfer()
        self._submit(self.pods[index], request, now, kv_ready=True)

    def _submit(self, pod: Pod, request: Request, now: float, kv_ready: bool = False) -> None:
        pod.submit(request, now, kv_ready)
        if pod.step_end_s is None:
            self._schedule(pod, now)

    def _schedule(self, pod: Pod, now: float) -> None:
        end = pod.start_step(now)
        if end is not None:
            heapq.heappush(self._events, (end, pod.index))

    async def _step_end(self, pod: Pod, now: float) -> None:
        _, finished = pod.finish_step(now)
        for seq in finished:
            if self.pd is not None and self.pd.is_prefill_stage(seq):
                self.finished.append(seq)
                self.pd.prefill_done(seq, self.pods, now)
                continue
            done = self._completion(seq, pod.index)
            self.completions.append(done)
            self.finished.append(seq)
            for features in self._features.pop(seq.request.id):
                seen = self.policy.observe(Observation(done, features))
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
        route = self.pd.routes.get(request.id) if self.pd is not None else None
        prefill = route.prefill if route is not None else None
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
            prefill_pod=prefill,
            prefill_hit_tokens=route.prefill_hit_tokens if route and prefill is not None else 0,
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
            pd=self.pd.config if self.pd is not None else None,
            pd_routes=self.pd.routes if self.pd is not None else {},
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
        pod_type=pod.role,
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
