"""Live (adaptive conformal) calibration: the update by hand, its coverage on a sequence
whose distribution shifts, and the leading trainer scoring stored rows and publishing the
file that prediction servers follow."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from shared.live_calibration import (
    MAX_LIVE_LOG_OFFSET,
    LiveCalibrationReader,
    read_live_calibration,
)
from shared.targets import Target
from tests.apps import app_of
from tests.training_server.conftest import OpenClient, ingest, train
from training_server.retrain.live_calibration import aci_step


def test_aci_step_by_hand() -> None:
    actual = np.array([10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0, 80.0, 90.0, 100.0])
    served = np.full(10, 75.0)  # 3 misses (80, 90, 100), 7 hits
    # 0.1 + 0.01 * (3 - 0.1 * 10) = 0.1 + 0.02
    assert aci_step(0.1, actual, served, 0.9, 0.01) == pytest.approx(0.12)
    # all hits: 0 + 0.01 * (0 - 1) = -0.01
    assert aci_step(0.0, actual, np.full(10, 1000.0), 0.9, 0.01) == pytest.approx(-0.01)
    # a miss costs q, a hit 1 - q: 9 hits and 1 miss leave the factor where it was
    assert aci_step(0.3, actual, np.array([1000.0] * 9 + [1.0]), 0.9, 0.05) == pytest.approx(0.3)
    assert aci_step(1.99, actual, np.zeros(10), 0.9, 0.5) == MAX_LIVE_LOG_OFFSET


def test_coverage_holds_through_a_shift_in_the_distribution() -> None:
    """A model that is right for a while, then 2x too low (load doubled): served through
    the live factor, updated after each 25-row batch as in production, the share of
    covered rows is ~0.9 in each half, where the model alone falls to ~0.4."""
    rng = np.random.default_rng(0)
    batches, per, q = 400, 25, 0.9
    offset, hits, raw_hits = 0.0, [], []
    for k in range(batches):
        model_p90 = 100.0 * math.exp(1.2816 * 0.3)  # log-normal(log 100, 0.3): its p90
        scale = 1.0 if k < batches // 2 else 2.0
        actual = scale * 100.0 * np.exp(rng.normal(0.0, 0.3, per))
        served = np.full(per, model_p90 * math.exp(offset))
        hits.append(np.mean(actual <= served))
        raw_hits.append(np.mean(actual <= model_p90))
        offset = aci_step(offset, actual, served, q, 0.005)
    first, second = np.mean(hits[: batches // 2]), np.mean(hits[batches // 2 :])
    assert first == pytest.approx(0.9, abs=0.02)
    assert second == pytest.approx(0.9, abs=0.03)
    assert np.mean(raw_hits[batches // 2 :]) < 0.5
    assert offset == pytest.approx(math.log(2.0), abs=0.15)  # it found the new level


def rows_with_served(n: int, seed: int, factor: float) -> list[dict[str, Any]]:
    """Synthetic rows carrying a served p90 of `factor` x their actual (< 1: all missed)."""
    rows = synthetic_rows(n, seed=seed)
    for row in rows:
        for t in Target:
            actual = row[t.actual_field]
            row[t.predicted_field] = actual * factor if actual > 0 else 123.0
    return rows


def tick(client: TestClient) -> None:
    app_of(client).state.pools.default.calibrator.tick()


def test_leader_raises_the_factor_on_misses_and_publishes_it(open_client: OpenClient) -> None:
    client = open_client(calibration_step=0.01)
    train(client)  # a trained bundle: both targets get corrected
    tick(client)  # the first tick resumes at the newest row: history is not re-scored
    published = read_live_calibration(app_of(client).state.settings.model_dir)
    assert published is not None
    assert all(e.log_offset == 0.0 for e in published.targets.values())
    before = client.post("/predict", json=_epp_row()).json()

    ingest(client, rows_with_served(200, seed=5, factor=0.5))  # every served p90 missed
    tick(client)
    published = read_live_calibration(app_of(client).state.settings.model_dir)
    assert published is not None
    for target, entry in published.targets.items():
        n = sum(1 for r in rows_with_served(200, 5, 0.5) if r[target.actual_field] > 0)
        assert entry.rows == n and entry.recent_coverage == 0.0
        assert entry.log_offset == pytest.approx(min(MAX_LIVE_LOG_OFFSET, 0.01 * 0.9 * n))
    # the trainer's own predict route serves the corrected p90 at once
    after = client.post("/predict", json=_epp_row()).json()
    offset = published.targets[Target.TTFT].log_offset
    assert after["ttft_ms"] == pytest.approx(before["ttft_ms"] * math.exp(offset), rel=1e-6)
    metrics = client.get("/metrics").text
    assert 'latency_live_calibration_log_offset{target="ttft"}' in metrics
    assert 'latency_live_coverage{target="tpot"} 0.0' in metrics
    assert client.get("/calibration").json()["through_sample_id"] == published.through_sample_id


def test_rows_without_a_served_prediction_or_model_are_not_scored(
    open_client: OpenClient,
) -> None:
    client = open_client()
    assert client.post("/retrain").json()["outcome"] == "skipped"  # leads, nothing to fit
    tick(client)  # nothing trained yet: the prior is never corrected
    ingest(client, rows_with_served(100, seed=6, factor=0.5))
    tick(client)
    published = read_live_calibration(app_of(client).state.settings.model_dir)
    assert published is not None and published.through_sample_id > 0
    assert all(e.rows == 0 and e.log_offset == 0.0 for e in published.targets.values())
    train(client, seed=7)  # rows without predicted_* fields: nothing to score either
    tick(client)
    published = read_live_calibration(app_of(client).state.settings.model_dir)
    assert published is not None
    assert all(e.rows == 0 for e in published.targets.values())


def test_off_removes_a_stale_file_and_never_publishes(open_client: OpenClient) -> None:
    leader = open_client(name="a")
    train(leader)
    tick(leader)
    model_dir = app_of(leader).state.settings.model_dir
    assert read_live_calibration(model_dir) is not None
    off = open_client(name="b", model_dir=model_dir, calibration="split")
    app_of(off).state.pools.default.calibrator.start()
    assert read_live_calibration(model_dir) is None
    ingest(off, rows_with_served(100, seed=8, factor=0.5))
    tick(off)
    assert read_live_calibration(model_dir) is None


def test_reader_follows_replacements_and_keeps_the_last_good_file(
    open_client: OpenClient,
) -> None:
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    model_dir = app_of(client).state.settings.model_dir
    reader = LiveCalibrationReader(model_dir)
    assert reader.poll() and not reader.poll()  # read once, then unchanged
    ingest(client, rows_with_served(50, seed=9, factor=0.5))
    tick(client)
    assert reader.poll() and reader.log_offsets(0.9)[Target.TTFT] > 0
    assert reader.log_offsets(0.5) == {}  # a factor for another quantile is never served
    good = reader.current
    (model_dir / "calibration.json").write_text('{"format_version": 1, "quantile": "x"}')
    with pytest.raises(ValueError, match=r"calibration\.json"):
        reader.poll()
    assert reader.current is good


def _epp_row() -> dict[str, Any]:
    row = {k: v for k, v in synthetic_rows(1, seed=11)[0].items() if not k.startswith("actual_")}
    return row
