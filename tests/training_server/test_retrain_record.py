"""The JSON of one retrain, as GET /retrains, /data/status and /metrics show it: its keys are
an API (the dashboard, latency_cli and the benchmarks read them), pinned here."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from tests.training_server.conftest import OpenClient, train

# One entry of GET /retrains: every column of the retrains table, in the table's order.
RETRAIN_KEYS = [
    "id",
    "version",
    "started_at",
    "duration_s",
    "status",
    "error",
    "model_type",
    "objective",
    "quantile",
    "max_sample_id",
    "trainer",
    "ttft_train_samples",
    "ttft_test_samples",
    "ttft_mae",
    "ttft_rmse",
    "ttft_pinball_loss",
    "ttft_coverage",
    "ttft_violation_rate",
    "tpot_train_samples",
    "tpot_test_samples",
    "tpot_mae",
    "tpot_rmse",
    "tpot_pinball_loss",
    "tpot_coverage",
    "tpot_violation_rate",
    "ttft_raw_coverage",
    "ttft_calibration_log_offset",
    "ttft_live_coverage",
    "ttft_live_pinball_loss",
    "ttft_live_rows",
    "tpot_raw_coverage",
    "tpot_calibration_log_offset",
    "tpot_live_coverage",
    "tpot_live_pinball_loss",
    "tpot_live_rows",
    "regimes",
    "window_limit",
    "ttft_model_choice",
    "tpot_model_choice",
    "model_candidates",
    "pool",
]
PER_TARGET = [k.removeprefix("ttft_") for k in RETRAIN_KEYS if k.startswith("ttft_")]


def history(client: TestClient) -> list[dict[str, Any]]:
    entries: list[dict[str, Any]] = client.get("/retrains").json()["retrains"]
    return entries


def test_a_history_entry_has_every_column_in_order(client: TestClient) -> None:
    train(client)
    (entry,) = history(client)
    assert list(entry) == RETRAIN_KEYS
    assert (entry["id"], entry["status"], entry["error"], entry["window_limit"]) == (
        1,
        "ok",
        None,
        100_000,
    )
    assert entry["started_at"].endswith("Z") and entry["version"]
    for t in ("ttft", "tpot"):
        assert type(entry[f"{t}_train_samples"]) is int and entry[f"{t}_train_samples"] > 0
        assert entry[f"{t}_live_rows"] == 0 and entry[f"{t}_live_coverage"] is None
        assert 0.0 <= entry[f"{t}_coverage"] <= 1.0
        assert entry[f"{t}_model_choice"] in entry["model_candidates"][t]
        assert set(entry["regimes"][t]) >= {"queued", "not_queued"}


def test_the_status_detail_is_the_history_entry(open_client: OpenClient, tmp_path: Path) -> None:
    """Fresh from the retrain (no id yet) and after a restart (read back from the store)."""
    db_url = f"sqlite:///{tmp_path / 'store.db'}"
    client = open_client(db_url=db_url, model_dir=tmp_path / "models")
    status = train(client)
    (entry,) = history(client)
    detail = status["last_retrain_detail"]
    assert set(detail) == set(RETRAIN_KEYS) - {"id"}
    assert detail == {k: v for k, v in entry.items() if k != "id"}
    assert status["last_retrain"] == entry["started_at"]

    restarted = open_client(db_url=db_url, name="b", model_dir=tmp_path / "models")
    after = restarted.get("/data/status").json()
    assert list(after["last_retrain_detail"]) == RETRAIN_KEYS
    assert after["last_retrain_detail"] == entry


def test_a_failed_entry_has_the_same_keys(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> None:
        raise OSError("disk full")

    monkeypatch.setattr("training_server.retrain.retrainer.write_and_load", refuse)
    client.post("/add_training_data_bulk", json={"entries": synthetic_rows(400)})
    assert client.post("/retrain").json()["outcome"] == "failed"
    (entry,) = history(client)
    assert list(entry) == RETRAIN_KEYS
    assert (entry["status"], entry["version"]) == ("failed", None)
    assert entry["error"] and entry["max_sample_id"] == 400
    nulls = [k for k in RETRAIN_KEYS if k.startswith(("ttft_", "tpot_"))]
    nulls += ["regimes", "window_limit", "model_candidates"]
    assert all(entry[k] is None for k in nulls), {k: entry[k] for k in nulls}
    assert client.get("/data/status").json()["last_retrain_detail"] is None


def test_metrics_show_the_latest_retrain(client: TestClient) -> None:
    train(client)
    (entry,) = history(client)
    text = client.get("/metrics").text
    lines = set(text.splitlines())
    for t in ("ttft", "tpot"):
        assert f"{t}_quantile_loss{{}} {entry[f'{t}_pinball_loss']}" in lines
        assert f"{t}_coverage_percent{{}} {100.0 * entry[f'{t}_coverage']}" in lines
        assert f"{t}_violation_rate_percent{{}} {100.0 * entry[f'{t}_violation_rate']}" in lines
        assert f"{t}_mae{{}} {entry[f'{t}_mae']}" in lines
        assert f"{t}_rmse{{}} {entry[f'{t}_rmse']}" in lines
        for name in PER_TARGET:
            value = entry[f"{t}_{name}"]
            series = f'latency_retrain_metric{{metric="{name}",target="{t}"}}'
            shown = any(line.startswith(series + " ") for line in lines)
            numeric = name not in ("train_samples", "test_samples", "live_rows", "model_choice")
            assert shown == (numeric and value is not None), name
            if shown:
                assert f"{series} {float(value)}" in lines, name
        for candidate in entry["model_candidates"][t]:
            chosen = 1.0 if candidate == entry[f"{t}_model_choice"] else 0.0
            assert f'latency_model_choice{{candidate="{candidate}",target="{t}"}} {chosen}' in lines
        for regime, scored in entry["regimes"][t].items():
            assert (
                f'latency_retrain_regime_coverage{{regime="{regime}",target="{t}"}} '
                f"{float(scored['coverage'])}" in lines
            )
