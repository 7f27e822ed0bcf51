"""The blend of the served TPOT with its level (training_server.retrain.level_blend): how the
weight learns, what the level holds, and what the leader publishes and every server
serves."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from devkit.synthetic import synthetic_rows
from shared.live_calibration import Blend, LiveCalibration
from shared.targets import Target
from tests.apps import app_of
from tests.training_server.conftest import OpenClient, ingest, published_of, tick, train
from training_server.retrain.level_blend import (
    LEVEL_MIN_ROWS,
    LEVEL_ROWS,
    START_WEIGHT,
    LevelBlend,
    resumed_blend,
)

Q = 0.9


def feed(blend: LevelBlend, actual: np.ndarray, answers: np.ndarray, batch: int = 50) -> None:
    """Rows in batches, as steps see them, with ids in order."""
    for start in range(0, len(actual), batch):
        ids = np.arange(start, min(start + batch, len(actual)))
        blend.observe(actual[ids], answers[ids], ids)


def test_the_weight_goes_to_a_model_that_tells_rows_apart() -> None:
    """Actuals of two kinds of rows, 10 and 40 ms, and answers at their own p90: the
    level (one number for both) loses, and the weight climbs to 1."""
    rng = np.random.default_rng(0)
    kind = rng.integers(0, 2, 5_000)
    actual = np.where(kind, 40.0, 10.0) * rng.uniform(0.9, 1.0, 5_000)
    answers = np.where(kind, 40.0, 10.0)
    blend = LevelBlend(Q)
    feed(blend, actual, answers)
    assert blend.weight == 1.0
    assert not blend.active  # served alone
    served = blend.served(answers[:4])
    assert served.tolist() == answers[:4].tolist()


def test_the_weight_leaves_a_model_that_follows_noise() -> None:
    """Actuals of one level with noise, and answers that chase each row's noise the wrong
    way (a factor a batch late): the blend learns to lean on the level."""
    rng = np.random.default_rng(1)
    actual = 20.0 * rng.uniform(0.8, 1.0, 5_000)
    answers = 20.0 * rng.uniform(0.7, 1.3, 5_000)  # unrelated to each row's actual
    blend = LevelBlend(Q)
    feed(blend, actual, answers)
    assert blend.weight < START_WEIGHT
    assert blend.active
    assert blend.level_ms == pytest.approx(np.quantile(actual[-LEVEL_ROWS:], Q))
    served = blend.served(np.array([30.0]))
    assert served[0] == pytest.approx(blend.weight * 30.0 + (1 - blend.weight) * blend.level_ms)


def test_no_level_before_enough_rows_and_a_large_shift_forgets_the_old_level() -> None:
    blend = LevelBlend(Q)
    few = np.full(LEVEL_MIN_ROWS - 1, 10.0)
    blend.observe(few, few, np.arange(len(few)))
    assert blend.level_ms == 0.0 and not blend.active
    assert blend.served(np.array([7.0])).tolist() == [7.0]
    feed(blend, np.full(400, 10.0), np.full(400, 10.0))
    doubled = np.full(30, 20.0)
    ids = np.arange(1_000, 1_030)
    blend.observe(doubled, doubled, ids)
    assert blend.level_ms == pytest.approx(10.0)  # 30 rows of 20 among 400 of 10
    blend.since(1_000)
    assert blend.level_ms == pytest.approx(20.0)


def test_a_withdrawn_shift_gives_the_level_back_its_rows() -> None:
    """A burst's rows took for a new level (the factor's large shift at them), then the
    factor withdrew the shift (retrain.live_factor): the level is again that of every
    newest row, the burst a few of them, not the burst's own p90."""
    blend = LevelBlend(Q)
    feed(blend, np.full(400, 10.0), np.full(400, 10.0))
    burst = np.full(20, 30.0)
    blend.observe(burst, burst, np.arange(1_000, 1_020), large_since=1_000)
    assert blend.level_ms == pytest.approx(30.0)
    calm = np.full(25, 10.0)
    blend.observe(calm, calm, np.arange(1_020, 1_045), large_since=0)
    assert blend.level_ms == pytest.approx(10.0)  # 20 of 445 rows: under the top tenth


def test_a_new_leader_resumes_a_published_blend() -> None:
    entry = LiveCalibration.model_validate(
        {
            "updated_at": "2026-12-07T00:00:00Z",
            "quantile": Q,
            "through_sample_id": 1,
            "targets": {"tpot": {"blend_weight": 0.3, "blend_level_ms": 12.5}},
        }
    ).targets[Target.TPOT]
    resumed = resumed_blend(Q, entry)
    assert (resumed.weight, resumed.level_ms) == (0.3, 12.5)
    fresh = resumed_blend(Q, entry.model_copy(update={"blend_level_ms": 0.0}))
    assert (fresh.weight, fresh.level_ms) == (START_WEIGHT, 0.0)


def test_a_pools_blend_gives_way_to_its_groups() -> None:
    """Where rows fall into groups the pool's level (a mix of theirs) blends no row."""
    entry = {"blend_weight": 0.5, "blend_level_ms": 10.0}
    calibration = LiveCalibration.model_validate(
        {
            "updated_at": "2026-12-07T00:00:00Z",
            "quantile": Q,
            "through_sample_id": 1,
            "targets": {"tpot": entry, "ttft": entry},
            "groups": {"b200": {"tpot": {**entry, "blend_level_ms": 5.0}}},
        }
    )
    blends = calibration.log_offsets(Q).blends
    assert blends == {"": {Target.TTFT: Blend(0.5, 10.0)}, "b200": {Target.TPOT: Blend(0.5, 5.0)}}
    assert calibration.log_offsets(0.5).blends == {}  # another quantile: nothing


def _ask() -> dict[str, Any]:
    """A request from a monolithic pod (synthetic rows draw P/D roles too)."""
    row = {k: v for k, v in synthetic_rows(1, seed=11)[0].items() if not k.startswith("actual_")}
    return {**row, "pod_type": ""}


def test_the_leader_publishes_each_groups_blend_and_the_route_serves_it(
    open_client: OpenClient,
) -> None:
    """Rows of two classes after a trained bundle: each class's TPOT gets a level of its
    own (the quantile of its actuals) and a learnt weight; TTFT none. The predict route
    serves a row of each class its blend, and a row of no class the answer alone."""
    client = open_client()
    train(client)
    tick(client)
    unblended = {
        pod_class: client.post("/predict", json={**_ask(), "pod_class": pod_class}).json()
        for pod_class in ("fast", "slow", "")
    }
    rows = {"fast": synthetic_rows(300, seed=3), "slow": synthetic_rows(300, seed=4)}
    for row in rows["slow"]:
        row["actual_tpot_ms"] *= 1.25  # a level apart, not a large shift (which resets)
    store = app_of(client).state.pools.default.store
    first = store.max_sample_id()
    for pod_class, group in rows.items():
        ingest(client, [{**row, "pod_class": pod_class, "pod_type": ""} for row in group])
    tick(client)
    published = published_of(client)
    assert Target.TTFT not in published.log_offsets(Q).blends.get("fast", {})
    stored = store.served_since(first, limit=10_000, features=True)
    for pod_class in rows:
        entry = published.groups[pod_class][Target.TPOT]
        actual = stored.actual[Target.TPOT]
        mine = (stored.columns["pod_class"] == pod_class) & (actual > 0)
        assert entry.blend_level_ms == pytest.approx(np.quantile(actual[mine], Q))
        assert 0.0 <= entry.blend_weight < 1.0
        assert published.groups[pod_class][Target.TTFT].blend_weight == 1.0
        factor = np.exp(entry.log_offset)
        answer = unblended[pod_class]["tpot_ms"] * factor  # the group's factor moved too
        expected = entry.blend_weight * answer + (1 - entry.blend_weight) * entry.blend_level_ms
        served = client.post("/predict", json={**_ask(), "pod_class": pod_class}).json()
        assert served["tpot_ms"] == pytest.approx(expected, rel=1e-6)
    pool = published.targets[Target.TPOT]
    alone = client.post("/predict", json=_ask()).json()
    assert alone["tpot_ms"] == pytest.approx(
        unblended[""]["tpot_ms"] * np.exp(pool.log_offset), rel=1e-6
    )
    assert json.loads(client.get("/calibration").text)["groups"]["slow"]["tpot"]["blend_weight"]


def test_a_pool_without_groups_serves_the_pools_blend(open_client: OpenClient) -> None:
    """Rows of no class or role: the pool's TPOT blend is published and served."""
    client = open_client()
    train(client)
    tick(client)
    before = client.post("/predict", json=_ask()).json()
    ingest(client, [{**row, "pod_type": ""} for row in synthetic_rows(300, seed=5)])
    tick(client)
    published = published_of(client)
    assert not published.groups
    entry = published.targets[Target.TPOT]
    assert entry.blend_level_ms > 0 and 0.0 <= entry.blend_weight < 1.0
    answer = before["tpot_ms"] * np.exp(entry.log_offset)
    after = client.post("/predict", json=_ask()).json()
    expected = entry.blend_weight * answer + (1 - entry.blend_weight) * entry.blend_level_ms
    assert after["tpot_ms"] == pytest.approx(expected, rel=1e-6)
    metrics = client.get("/metrics").text
    assert f'latency_live_blend_weight{{target="tpot"}} {entry.blend_weight}' in metrics
    ttft = published.targets[Target.TTFT]
    assert after["ttft_ms"] == pytest.approx(before["ttft_ms"] * np.exp(ttft.log_offset), rel=1e-6)
