"""A pool that changes during a run (poolsim.pool_changes): pods that join it at a time
(`--join`) and classes whose steps slow down from a time (`--slowdown`)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from poolsim.engine import Engine, RunResult
from poolsim.hardware import B200, H200, Hardware
from poolsim.metrics import class_share_over_time, summarize
from poolsim.policies import RoundRobinPolicy, make_policy
from poolsim.policy_api import PodFeatures, Policy, RequestInfo
from poolsim.pool_changes import (
    PodJoin,
    PoolChangeError,
    PoolChanges,
    Slowdown,
    parse_join,
    parse_pool_changes,
    parse_slowdown,
)
from poolsim.request import Request
from poolsim.workloads import generate
from tests.poolsim.helpers import requests
from tests.poolsim.test_command import simulate


def run(
    reqs: Sequence[Request],
    pool: Sequence[Hardware],
    policy: Policy,
    changes: PoolChanges,
    regret: bool = True,
) -> RunResult:
    engine = Engine(reqs, len(pool), pool, policy, changes=changes, regret=regret)
    return asyncio.run(engine.run())


# ---- parsing


def test_the_specs_parse_into_typed_records() -> None:
    assert parse_join("b200:2@120") == PodJoin(B200, 2, 120.0)
    assert parse_join(" h200 : 1 @ 0.5 ") == PodJoin(H200, 1, 0.5)
    assert parse_slowdown("h200:1.5@180") == Slowdown("h200", 1.5, 180.0)
    changes = parse_pool_changes(
        ["b200:1@60", "h200:2@30"], ["b200:2@90", "h200:0.5@10"], [H200, H200]
    )
    assert [(j.hw.name, j.at_s) for j in changes.joins] == [("h200", 30.0), ("b200", 60.0)]
    assert [s.at_s for s in changes.slowdowns] == [10.0, 90.0]
    assert [hw.name for hw in changes.pool([H200, H200])] == ["h200"] * 4 + ["b200"]
    assert changes.join_indices(2) == [[2, 3], [4]]
    echo = changes.to_json([H200, H200])
    assert echo["joins"][0] == {"class": "h200", "count": 2, "at_s": 30.0, "pods": [2, 3]}
    assert echo["slowdowns"][1] == {"class": "b200", "factor": 2.0, "at_s": 90.0, "pods": [4]}
    slower = Slowdown("h200", 2.0, 0.0).apply(H200)
    assert slower.name == "h200" and slower.kv_blocks == H200.kv_blocks
    assert slower.step_ms(100, 5000, 1e6) == pytest.approx(2 * H200.step_ms(100, 5000, 1e6))


@pytest.mark.parametrize(
    ("flag", "spec", "says"),
    [
        ("--join", "h100:2@10", "unknown hardware class 'h100'"),
        ("--join", "b200:0@10", "count must be an integer >= 1, not '0'"),
        ("--join", "b200:two@10", "not 'two'"),
        ("--join", "b200:2@-5", "seconds >= 0, not '-5'"),
        ("--join", "b200:2@soon", "not 'soon'"),
        ("--join", "b200:2", "missing '@SECONDS'"),
        ("--join", "b200@10", "missing ':'"),
        ("--slowdown", "h200:0@10", "factor must be a number > 0, not '0'"),
        ("--slowdown", "h200:-1.5@10", "not '-1.5'"),
        ("--slowdown", "h200:nan@10", "not 'nan'"),
        ("--slowdown", "h200:1.5@-1", "seconds >= 0, not '-1'"),
        ("--slowdown", "h200:1.5", "missing '@SECONDS'"),
        ("--slowdown", "h200@3", "missing ':'"),
        ("--slowdown", "x:2@3", "unknown hardware class 'x'"),
        ("--slowdown", "b200:2@3", "no pod of class b200 in the pool (h200)"),
    ],
)
def test_a_bad_spec_names_the_flag_and_the_bad_part(flag: str, spec: str, says: str) -> None:
    joins, slowdowns = ([spec], []) if flag == "--join" else ([], [spec])
    with pytest.raises(PoolChangeError) as caught:
        parse_pool_changes(joins, slowdowns, [H200])
    assert isinstance(caught.value, ValueError)
    assert f"{flag} {spec!r}" in str(caught.value) and says in str(caught.value)


# ---- joins


class CountingRoundRobin(RoundRobinPolicy):
    """Round-robin that records how many pods each pick was offered."""

    def __init__(self) -> None:
        super().__init__(0)
        self.offered: list[tuple[float, int]] = []

    def choose(self, request: RequestInfo, pods: Sequence[PodFeatures], now_s: float) -> int:
        self.offered.append((request.arrival_s, len(pods)))
        return super().choose(request, pods, now_s)


def test_joining_pods_are_offered_and_routed_to_only_from_their_time() -> None:
    reqs = requests([(0.25 * i, 200, 4) for i in range(40)])  # 0 .. 9.75 s
    policy = CountingRoundRobin()
    changes = PoolChanges(joins=(PodJoin(B200, 2, 5.0),))
    result = run(reqs, [H200, H200], policy, changes)
    assert [pod.hw.name for pod in result.pods] == ["h200", "h200", "b200", "b200"]
    assert all(n == (4 if t >= 5.0 else 2) for t, n in policy.offered)
    assert {n for _, n in policy.offered} == {2, 4}
    late = [t for t, pod in result.routes if pod >= 2]
    assert late and min(late) >= 5.0
    assert len(result.regrets) == len(reqs) and not result.unfinished
    shares = summarize(result)["class_share_over_time"]
    assert shares["bin_s"] == 30 and set(shares["classes"]) == {"h200", "b200"}


@pytest.mark.parametrize("name", ["oracle", "token-load", "heuristic", "least-requests"])
def test_no_policy_or_look_ahead_sees_a_pod_before_it_joins(name: str) -> None:
    # the joining b200 pods are empty and faster: any policy seeing them early would pick
    # them; the oracle and the regret meter would measure on them
    reqs = generate("mixed", 2, 20.0, seed=1)
    changes = PoolChanges(joins=(PodJoin(B200, 2, 10.0),))
    result = run(reqs, [H200, H200], make_policy(name, 1), changes)
    before = [pod for t, pod in result.routes if t < 10.0]
    after = [pod for t, pod in result.routes if t >= 10.0]
    assert before and set(before) <= {0, 1}
    assert {2, 3} <= set(after)
    assert len(result.regrets) == len(reqs) and not result.unfinished
    if name == "oracle":  # its own picks cost nothing against the pods it could see
        assert max(regret for _, regret in result.regrets) == 0.0


def test_a_run_with_changes_is_a_pure_function_of_its_inputs() -> None:
    reqs = generate("mixed", 2, 15.0, seed=2)
    changes = parse_pool_changes(["b200:1@5"], ["h200:2@8"], [H200, H200])
    one, two = (
        run(reqs, [H200, H200], make_policy("token-load", 3), changes, regret=False)
        for _ in range(2)
    )
    assert one.routes == two.routes
    assert [c.ttft_ms for c in one.completions] == [c.ttft_ms for c in two.completions]


# ---- slowdowns


def test_a_slowdown_leaves_the_running_step_alone_and_slows_the_next_ones() -> None:
    (request,) = requests([(0.0, 100, 4)])  # one prefill step, then three decode steps
    (plain,) = run([request], [H200], RoundRobinPolicy(0), PoolChanges()).completions
    step_s = plain.first_token_s  # the prefill step, from 0
    changes = PoolChanges(slowdowns=(Slowdown("h200", 2.0, step_s / 2),))
    result = run([request], [H200], RoundRobinPolicy(0), changes)
    (slowed,) = result.completions
    assert slowed.first_token_s == plain.first_token_s  # the step in flight kept its length
    decode_s = plain.finish_s - plain.first_token_s
    assert slowed.finish_s - slowed.first_token_s == pytest.approx(2 * decode_s)
    (pod,) = result.pods
    assert pod.hw.name == "h200" and pod.hw.step_floor_ms == 2 * H200.step_floor_ms
    late = PoolChanges(slowdowns=(Slowdown("h200", 2.0, plain.finish_s + 1.0),))
    (unaffected,) = run([request], [H200], RoundRobinPolicy(0), late).completions
    assert unaffected == plain


def test_a_slowdown_slows_its_class_from_its_time_on_and_no_other() -> None:
    # a request per pod every second, alone on its pod: TTFT is its prefill step
    reqs = requests([(t + 0.001 * pod, 300, 2) for t in range(10) for pod in range(2)])
    changes = PoolChanges(slowdowns=(Slowdown("h200", 1.5, 5.0),))
    result = run(reqs, [H200, B200], RoundRobinPolicy(0), changes)
    ttft: dict[tuple[int, bool], set[float]] = {
        (c.pod, c.request.arrival_s >= 5.0): set() for c in result.completions
    }
    for c in result.completions:
        ttft[c.pod, c.request.arrival_s >= 5.0].add(round(c.ttft_ms - H200.overhead_ms, 6))
    (h200_before,), (h200_after,) = ttft[0, False], ttft[0, True]
    assert h200_after == pytest.approx(1.5 * h200_before)
    assert ttft[1, False] == ttft[1, True]  # b200 untouched
    assert result.pods[1].hw == B200


def test_a_slowdown_at_an_arrival_applies_to_that_requests_step() -> None:
    reqs = requests([(0.0, 300, 1), (5.0, 300, 1)])
    changes = PoolChanges(slowdowns=(Slowdown("h200", 3.0, 5.0),))
    first, second = run(reqs, [H200], RoundRobinPolicy(0), changes).completions
    overhead = H200.overhead_ms
    assert second.ttft_ms - overhead == pytest.approx(3 * (first.ttft_ms - overhead))


def test_class_share_over_time_bins_routes_by_arrival() -> None:
    routes = [(1.0, 0), (2.0, 1), (31.0, 2), (32.0, 2), (95.0, 0)]
    shares = class_share_over_time(routes, ["h200", "h200", "b200"])
    assert shares == {
        "bin_s": 30,
        "classes": {"h200": [1.0, 0.0, 0.0, 1.0], "b200": [0.0, 1.0, 0.0, 0.0]},
    }


# ---- the command


def test_the_command_rejects_a_bad_spec_with_status_2_and_names_the_flag() -> None:
    done = simulate("--workload", "chat", "--join", "b200:0@10")
    assert done.returncode == 2 and "--join 'b200:0@10'" in done.stderr
    done = simulate("--workload", "chat", "--slowdown", "h200:1.5")
    assert done.returncode == 2 and "--slowdown 'h200:1.5': missing '@SECONDS'" in done.stderr


@pytest.mark.parametrize("name", ["predicted-latency", "latency-first"])
def test_the_predicted_policies_take_joining_pods(name: str, tmp_path: Path) -> None:
    # no predictor answers (the composite fallback), but the pick's per-pod state must
    # grow with the pool
    from devkit.processes import free_port

    out = tmp_path / "sim.json"
    done = simulate(
        "--workload",
        "mixed",
        "--pods",
        "2",
        "--duration",
        "10",
        "--policies",
        name,
        "--prediction-url",
        f"http://127.0.0.1:{free_port()}",
        "--speedup",
        "50",
        "--join",
        "b200:2@5",
        "--no-progress",
        "--json",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())["policies"][name]
    assert figures["unfinished"] == 0 and len(figures["pod_share"]) == 4
    assert figures["pod_share"][2] + figures["pod_share"][3] > 0


def test_the_json_echoes_the_changes_and_has_the_class_share_over_time(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    done = simulate(
        "--workload",
        "mixed",
        "--pods",
        "2",
        "--duration",
        "45",
        "--policies",
        "round-robin,token-load",
        "--join",
        "b200:1@30",
        "--slowdown",
        "h200:1.5@20",
        "--no-regret",
        "--no-progress",
        "--json",
        str(out),
        "--plots",
        str(tmp_path / "plots"),
    )
    assert done.returncode == 0, done.stderr
    assert "pool changes: join b200:1@30s, slowdown h200:x1.5@20s" in done.stdout
    document = json.loads(out.read_text())
    assert document["pods"] == 2 and document["pod_classes"] == ["h200", "h200", "b200"]
    assert document["pool_changes"] == {
        "joins": [{"class": "b200", "count": 1, "at_s": 30.0, "pods": [2]}],
        "slowdowns": [{"class": "h200", "factor": 1.5, "at_s": 20.0, "pods": [0, 1]}],
    }
    for name in ("round-robin", "token-load"):
        figures = document["policies"][name]
        assert len(figures["pod_share"]) == 3
        over_time = figures["class_share_over_time"]
        assert over_time["bin_s"] == 30 and list(over_time["classes"]) == ["h200", "b200"]
        assert over_time["classes"]["b200"][0] == 0.0 < over_time["classes"]["b200"][1]
        assert over_time["classes"]["h200"][0] == 1.0
    png = tmp_path / "plots" / "class_share_over_time.png"
    assert png.read_bytes()[:4] == b"\x89PNG"
