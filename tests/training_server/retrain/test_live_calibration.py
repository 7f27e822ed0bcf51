"""Live calibration: the leading trainer scoring stored rows, following a shift and a new
bundle, and publishing the file that prediction servers follow (the factor's own moves:
test_live_factor)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from shared.live_calibration import (
    LiveCalibrationReader,
    read_live_calibration,
)
from shared.targets import Target
from tests.apps import app_of
from tests.training_server.conftest import OpenClient, ingest, train


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
        # a shift: every actual at 2x its p90, so the factor is set to exactly 2x
        assert entry.log_offset == pytest.approx(math.log(2.0))
    # the trainer's own predict route serves the corrected p90 at once
    after = client.post("/predict", json=_epp_row()).json()
    offset = published.targets[Target.TTFT].log_offset
    assert after["ttft_ms"] == pytest.approx(before["ttft_ms"] * math.exp(offset), rel=1e-6)
    metrics = client.get("/metrics").text
    assert 'latency_live_calibration_log_offset{target="ttft"}' in metrics
    assert 'latency_live_coverage{target="tpot"} 0.0' in metrics
    assert 'latency_live_shifts_total{target="ttft"} 1.0' in metrics
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


def test_a_new_bundle_rebases_the_factor_so_the_served_p90_stays_put(
    open_client: OpenClient,
) -> None:
    """After the factor followed a doubling, a retrain on rows at 3x the level moves the
    bundle's own answers up: the factor comes down by the median ratio of the old bundle's
    answers to the new one's on the newest rows (not below 1x), instead of counting the
    move twice."""
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    ingest(client, rows_with_served(200, seed=5, factor=0.5))
    tick(client)
    state = app_of(client).state.pools.default
    old = state.calibrator.slot.published
    before = read_live_calibration(state.settings.model_dir)
    assert old is not None and before is not None
    higher = synthetic_rows(600, seed=12)
    for row in higher:
        for t in Target:
            row[t.actual_field] *= 3.0
    ingest(client, higher)
    assert client.post("/retrain").json()["outcome"] == "ok"
    new = state.calibrator.slot.published
    assert new is not None and new.version != old.version
    tick(client)  # no new rows: only the rebase
    after = read_live_calibration(state.settings.model_dir)
    assert after is not None
    for target in Target:
        columns, _ = state.store.window(target, test=False, limit=200)
        ratio = (
            old.with_live({}).predict(columns)[target] / new.with_live({}).predict(columns)[target]
        )
        move = float(np.median(np.log(ratio)))
        assert move < 0  # the new bundle answers higher: the factor gives that back
        expected = max(0.0, before.targets[target].log_offset + move)
        assert after.targets[target].log_offset == pytest.approx(expected, abs=1e-9)
