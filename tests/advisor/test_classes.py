"""Hardware classes read from the rows' pod_class: the pool advise rebuilds, the pods split
over its classes and each class's speeds estimated from its own rows (advisor.classes,
advisor.speeds), on rows a mixed simulated pool (2 h200 + 2 b200 under token-load) sent."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest

from advisor.classes import ClassPool, for_simulation, policies_for, read_classes
from advisor.options import Options
from advisor.pod_counts import split_pods
from advisor.predictor import Recording
from advisor.profile import output_model
from advisor.rows import StoreRows
from advisor.speeds import MIN_ROWS, UNSCALED
from latency_cli.main import build_parser
from poolsim.engine import Engine
from poolsim.hardware import A100, B200, H200
from poolsim.policies import make_policy
from poolsim.workloads import generate
from tests.advisor.stores import MIXED, START, as_store_rows, simulated_rows

DATASHEET_COMPUTE = H200.ms_per_token / B200.ms_per_token  # 2.25
POLICIES = ("heuristic", "token-load", "oracle")


@pytest.fixture(scope="module")
def mixed_rows() -> StoreRows:
    return as_store_rows(simulated_rows(640, 12.0, hardware=MIXED, policy="token-load"))


def options(pods: int = 4, counts: tuple[tuple[str, int], ...] = ()) -> Options:
    return Options(
        url="sqlite:///x.db",
        pods=pods,
        hours=6.0,
        slos=(None, None),
        seeds=(0,),
        policies=POLICIES,
        hardware=counts[0][0] if counts else "h200",
        sim_seconds=None,
        speedup=None,
        fit_rows=240,
        counts=counts,
    )


def rebuilt(rows: StoreRows, pods: int = 4) -> ClassPool:
    return read_classes(rows, options(pods), output_model(rows))


@pytest.mark.parametrize(
    ("weights", "pods", "expected"),
    [
        ({"a": 3, "b": 1}, 4, {"a": 3, "b": 1}),
        ({"a": 100, "b": 1}, 4, {"a": 3, "b": 1}),  # at least one pod each
        ({"a": 345, "b": 282}, 5, {"a": 3, "b": 2}),  # 2.76 / 2.24: the larger remainder
        ({"a": 1, "b": 1, "c": 1}, 7, {"a": 3, "b": 2, "c": 2}),  # ties: in order
        ({"a": 1, "b": 5, "c": 5}, 2, {"a": 0, "b": 1, "c": 1}),  # fewer pods than classes
        ({"a": 98, "b": 1, "c": 1}, 3, {"a": 1, "b": 1, "c": 1}),
    ],
)
def test_pods_are_split_by_share(
    weights: dict[str, float], pods: int, expected: dict[str, int]
) -> None:
    assert split_pods(weights, pods) == expected


def test_the_classes_and_their_speeds_come_from_the_rows(mixed_rows: StoreRows) -> None:
    pool = rebuilt(mixed_rows)
    by = {c.label: c for c in pool.classes}
    assert set(by) == {"h200", "b200"} and pool.from_rows and pool.mixed
    assert pool.split == "rows" and by["h200"].pods == by["b200"].pods == 2
    assert by["h200"].load_pods == by["b200"].load_pods == 2 and not pool.notes
    for c in pool.classes:  # known labels start from their own constants, which the rows match
        assert c.base == c.label == c.hardware.name
        assert 0.85 < c.speeds.compute < 1.15 and 0.85 < c.speeds.memory < 1.15
        assert c.speeds.ttft_rows >= MIN_ROWS and c.speeds.tpot_rows >= MIN_ROWS
    faster = by["h200"].hardware.ms_per_token / by["b200"].hardware.ms_per_token
    assert DATASHEET_COMPUTE / 1.5 < faster < DATASHEET_COMPUTE * 1.5
    names, notes = policies_for(POLICIES, pool)
    assert names == ("heuristic", "token-load", "token-load-per-class", "oracle") and not notes


def test_an_unknown_class_starts_from_h200_scaled_to_its_rows(mixed_rows: StoreRows) -> None:
    classes = mixed_rows.classes()
    gpu_x = replace(mixed_rows, pod_class=np.where(classes == "b200", "gpu-x", classes))
    pool = rebuilt(gpu_x, pods=5)
    by = {c.label: c for c in pool.classes}
    gpu = by["gpu-x"]
    assert gpu.base == "h200" and gpu.hardware.name == "gpu-x"
    # the b200 rows, read against h200's constants: b200's datasheet ratios, within 1.5x
    assert DATASHEET_COMPUTE / 1.5 < 1 / gpu.speeds.compute < DATASHEET_COMPUTE * 1.5
    assert 1.67 / 1.5 < 1 / gpu.speeds.memory < 1.67 * 1.5
    # 5 pods for a pool of 2 + 2 by the load: as even as 5 allows
    assert gpu.pods + by["h200"].pods == 5 and abs(gpu.pods - by["h200"].pods) == 1
    assert pool.split == "load"
    assert gpu.request_rows >= by["h200"].request_rows  # token-load sent the b200 pods more
    names, notes = policies_for(POLICIES, pool)
    assert "token-load-per-class" not in names and "gpu-x" in notes[0]


def test_the_rows_load_sets_the_split() -> None:
    """The `mixed` workload on 2 h200 + 2 b200 under the heuristic: the b200 pods serve two
    requests in three, so the shares would give them 3 of 4 pods; the load says 2 each,
    which is the pool that served them."""
    recording = Recording(make_policy("heuristic", 0))
    engine = Engine(generate("mixed", 4, 120.0, 0), 4, MIXED, recording, regret=False)
    asyncio.run(engine.run())
    stamped = [
        {**row, "timestamp": (START + timedelta(seconds=t)).isoformat()}
        for row, t in zip(recording.rows, recording.arrival_s, strict=True)
    ]
    pool = rebuilt(as_store_rows(stamped))
    assert [(c.label, c.pods, c.sim_pods, c.load_pods) for c in pool.classes] == [
        ("b200", 2, 2, 2),
        ("h200", 2, 2, 2),
    ]
    assert pool.split == "load" and pool.label == "b200:2,h200:2"
    assert "pods from the rows' load (Little's law per class): b200:2,h200:2" in pool.notes[-1]
    assert "gave b200:3,h200:1" in pool.notes[-1]


def test_rows_without_a_class_keep_the_hardware_pool(mixed_rows: StoreRows) -> None:
    pool = rebuilt(replace(mixed_rows, pod_class=None))
    (only,) = pool.classes
    assert not pool.from_rows and not pool.shown and only.hardware == H200
    assert only.speeds == UNSCALED and only.pods == 4
    assert policies_for(POLICIES, pool) == (POLICIES, ())


def test_hardware_counts_set_the_pods_per_class(mixed_rows: StoreRows) -> None:
    h200_only = mixed_rows.subset(mixed_rows.classes() != "b200")
    h200_only = replace(h200_only, pod_class=None)  # rows without a class: --hardware's first
    counts = (("h200", 3), ("a100", 1))
    pool = read_classes(h200_only, options(4, counts), output_model(h200_only))
    by = {c.label: c for c in pool.classes}
    assert [c.label for c in pool.classes] == ["h200", "a100"] and pool.split == "hardware"
    assert by["h200"].pods == 3 and by["a100"].hardware == A100 and pool.label == "h200:3,a100:1"
    assert not pool.from_rows and pool.shown  # rows of the one class: its constants unscaled
    small = for_simulation(pool, 2)
    assert [c.sim_pods for c in small.classes] == [1, 1] and len(small.pods()) == 2


def test_hardware_counts_give_the_pods() -> None:
    from advisor.command import check

    parser = build_parser("advise")
    parsed = parser.parse_args(["advise", "--db", "sqlite:///x.db", "--hardware", "h200:2,b200:2"])
    checked = check(parsed)
    assert checked.pods == 4 and checked.counts == (("h200", 2), ("b200", 2))
    assert checked.hardware == "h200"
