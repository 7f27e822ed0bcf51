"""`pod_class` on the training server: ingested, stored (cut to 64 characters), read back
as a feature code and a label, scored per class by each retrain, and answered by its
/predict; a store without classes fits the models it fitted before, and its bundles do not
name the feature (prediction servers from before pod_class load them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient
from sqlalchemy import select

from devkit.synthetic import prediction_row, synthetic_rows
from shared.backends import backend_for
from shared.features import Columns, columns_from_dicts, feature_names, pod_class_code
from shared.schemas import TrainingEntry
from shared.settings import ModelType, TrainingSettings
from shared.target_space import space_for
from shared.targets import TARGETS, Target
from tests.training_server.conftest import OpenClient, ingest
from training_server.retrain.fit import fit_model, fit_params, model_ms
from training_server.retrain.scoring import regime_coverage
from training_server.retrain.target import train_target
from training_server.store import SampleStore
from training_server.tables import samples

CLASSES = ("h200", "b200")


def classed_rows(n: int, seed: int) -> list[dict[str, Any]]:
    """Synthetic rows, half on each class; a b200 answers in 60 % of the time."""
    rows = synthetic_rows(n, seed=seed)
    for i, row in enumerate(rows):
        row["pod_class"] = CLASSES[i % 2]
        if row["pod_class"] == "b200":
            for target in TARGETS:
                row[target.actual_field] *= 0.6
    return rows


def stored_classes(client: TestClient) -> list[str]:
    store: SampleStore = client.app.state.pools.default.store  # type: ignore[attr-defined]
    with store.engine.connect() as conn:
        return list(conn.execute(select(samples.c.pod_class).order_by(samples.c.id)).scalars())


def test_ingestion_stores_the_class_and_absent_is_empty(client: TestClient) -> None:
    rows = synthetic_rows(4, seed=1)
    rows[0]["pod_class"] = "b200"
    rows[1]["pod_class"] = None
    rows[2]["pod_class"] = "x" * 100
    ingest(client, rows)
    assert stored_classes(client) == ["b200", "", "x" * 64, ""]


@pytest.mark.parametrize("value", [5, 2.5, False, ["b200"]])
def test_a_wrong_type_is_rejected_naming_the_field(client: TestClient, value: Any) -> None:
    good, bad = synthetic_rows(2, seed=2)
    bad["pod_class"] = value
    only_bad = client.post("/add_training_data_bulk", json={"entries": [bad]})
    assert only_bad.status_code == 422
    assert [e["loc"] for e in only_bad.json()["detail"]] == [["body", "entries", 0, "pod_class"]]
    mixed = client.post("/add_training_data_bulk", json={"entries": [good, bad]})
    assert mixed.status_code == 202
    assert mixed.json()["rejected"] == 1
    assert [e["loc"] for e in mixed.json()["errors"]] == [["body", "entries", 1, "pod_class"]]
    assert stored_classes(client) == [""]


def test_the_window_reads_codes_and_labels(store: SampleStore) -> None:
    """On SQLite and PostgreSQL."""
    store = SampleStore(store.engine, test_ratio=0.0)
    rows = synthetic_rows(6, seed=3)
    for row, pod_class in zip(rows, ("h200", "B200", "", "h200", None, "b200"), strict=True):
        row["actual_ttft_ms"], row["actual_tpot_ms"] = 10.0, 0.0
        row["pod_class"] = pod_class
    store.add_samples([TrainingEntry.model_validate(r) for r in rows])
    columns, _ = store.window(Target.TTFT, test=False)
    assert columns["pod_class"].tolist() == ["h200", "B200", "", "h200", "", "b200"]
    want = [pod_class_code(c) for c in ("h200", "b200", "", "h200", "", "b200")]
    np.testing.assert_array_equal(columns["pod_class_code"], want)


def test_each_retrain_scores_every_class_it_holds_out(open_client: OpenClient) -> None:
    client = open_client(test_ratio=0.3)
    ingest(client, classed_rows(600, seed=4))
    assert client.post("/retrain").json()["outcome"] == "ok"
    (entry,) = client.get("/retrains").json()["retrains"]
    for target in ("ttft", "tpot"):
        regimes = entry["regimes"][target]
        scored = {name: regimes[f"pod_class={name}"] for name in CLASSES}
        assert sum(s["n"] for s in scored.values()) == entry[f"{target}_test_samples"]
        for figures in scored.values():
            assert set(figures) == {"n", "coverage", "pinball_loss"}
            assert figures["n"] > 0 and 0.0 <= figures["coverage"] <= 1.0
            assert figures["pinball_loss"] >= 0.0
        assert {"queued", "not_queued"} <= set(regimes)  # the regimes from before, as before
    metrics = client.get("/metrics").text
    assert 'latency_retrain_regime_coverage{regime="pod_class=b200",target="ttft"}' in metrics


def test_a_store_without_classes_has_no_class_regimes(open_client: OpenClient) -> None:
    client = open_client(test_ratio=0.3)
    ingest(client, synthetic_rows(400, seed=5))
    assert client.post("/retrain").json()["outcome"] == "ok"
    (entry,) = client.get("/retrains").json()["retrains"]
    for target in ("ttft", "tpot"):
        assert not [r for r in entry["regimes"][target] if r.startswith("pod_class")]


def test_regime_coverage_per_class_by_hand() -> None:
    rows = [prediction_row() for _ in range(5)]
    columns = columns_from_dicts(rows)
    columns["pod_class"] = np.array(["h200", " H200", "b200", "", "b200"], dtype=object)
    y = np.array([10.0, 30.0, 10.0, 5.0, 50.0])
    pred = np.array([20.0, 20.0, 20.0, 20.0, 20.0])
    regimes = regime_coverage(columns, y, pred, 0.9)
    # h200: 10 covered (loss 0.1 * 10), 30 missed (0.9 * 10); b200: 10 covered, 50 missed
    assert regimes["pod_class=h200"] == pytest.approx(
        {"n": 2, "coverage": 0.5, "pinball_loss": 5.0}
    )
    assert regimes["pod_class=b200"] == pytest.approx(
        {"n": 2, "coverage": 0.5, "pinball_loss": (0.1 * 10 + 0.9 * 30) / 2}
    )
    assert not [name for name in regimes if name == "pod_class="]
    assert "pinball_loss" not in regime_coverage(columns, y, pred)["pod_class=b200"]


def test_the_training_servers_predict_takes_it(trained: TestClient) -> None:
    plain = trained.post("/predict", json=prediction_row())
    classed = trained.post("/predict", json=prediction_row(pod_class="b200"))
    bad = trained.post("/predict", json=prediction_row(pod_class=3))
    assert plain.status_code == classed.status_code == 200
    assert bad.status_code == 422
    assert [e["loc"] for e in bad.json()["detail"]] == [["body", "pod_class"]]


@pytest.mark.parametrize("model_type", list(ModelType))
@pytest.mark.parametrize("target", list(Target))
def test_without_classes_the_trees_are_the_ones_before(
    model_type: ModelType, target: Target
) -> None:
    """The code is 0 in every row: fitted with it or without it (the feature lists before
    pod_class), the models answer the same to the last bit."""
    rows = [r for r in synthetic_rows(1500, seed=6) if r[target.actual_field] > 0]
    columns = columns_from_dicts(rows)
    y = np.array([r[target.actual_field] for r in rows])
    settings = TrainingSettings(model_type=model_type, n_estimators=40)
    backend, space = backend_for(model_type), space_for(target)
    now = feature_names(target)
    before = tuple(n for n in now if n != "pod_class_code")
    answers = [
        model_ms(
            backend,
            fit_model(backend, fit_params(settings, target, names), names, columns, y, space),
            names,
            space,
            columns,
        )
        for names in (now, before)
    ]
    np.testing.assert_array_equal(answers[0], answers[1])


def published_features(client: TestClient) -> dict[Target, tuple[str, ...]]:
    """What the published bundle's manifest lists per target (as published)."""
    bundle = client.app.state.pools.default.slot.published  # type: ignore[attr-defined]
    assert bundle is not None and bundle.manifest is not None
    return {t: tuple(bundle.manifest.targets[t].features) for t in TARGETS}


def test_a_bundle_names_the_class_only_once_its_rows_carry_one(
    open_client: OpenClient,
) -> None:
    """Rows without a class (llm-d's EPP): the bundle lists the features from before
    pod_class, so prediction servers from before it load it; once rows carry a class (a
    mixed-hardware pool) both targets take the feature. /predict answers either way."""
    client = open_client(test_ratio=0.3)
    ingest(client, synthetic_rows(400, seed=7))
    assert client.post("/retrain").json()["outcome"] == "ok"
    before = {t: tuple(n for n in feature_names(t) if n != "pod_class_code") for t in TARGETS}
    assert published_features(client) == before
    for row in (prediction_row(), prediction_row(pod_class="b200")):
        assert client.post("/predict", json=row).status_code == 200

    ingest(client, classed_rows(400, seed=8))
    assert client.post("/retrain").json()["outcome"] == "ok"
    assert published_features(client) == {t: feature_names(t) for t in TARGETS}
    plain = client.post("/predict", json=prediction_row())
    classed = client.post("/predict", json=prediction_row(pod_class="b200"))
    assert plain.status_code == classed.status_code == 200
    (entry, _) = client.get("/retrains").json()["retrains"]  # newest first
    assert {"pod_class=h200", "pod_class=b200"} <= set(entry["regimes"]["ttft"])


@pytest.mark.parametrize("rows", [0, 5, 200])
def test_the_fit_lists_the_class_only_when_a_training_row_carries_it(rows: int) -> None:
    """Also below the rows a model needs (the prior answers, the bundle still lists names)
    and whatever the held-out rows carry: the training rows decide."""
    settings = TrainingSettings(n_estimators=10, min_samples_for_retrain=50)
    train_rows = [r for r in synthetic_rows(3 * rows, seed=9) if r["actual_ttft_ms"] > 0]
    test_rows = [r for r in classed_rows(100, seed=10) if r["actual_ttft_ms"] > 0]

    def window(data: list[dict[str, Any]]) -> tuple[Columns, np.ndarray]:
        return columns_from_dicts(data), np.array([r["actual_ttft_ms"] for r in data])

    plain = train_target(settings, Target.TTFT, window(train_rows), window(test_rows))
    assert "pod_class_code" not in plain.features
    assert plain.features == tuple(n for n in feature_names(Target.TTFT) if n != "pod_class_code")
    if train_rows:
        train_rows[-1] = {**train_rows[-1], "pod_class": "h200"}  # one row is enough
        classed = train_target(settings, Target.TTFT, window(train_rows), window(test_rows))
        assert classed.features == feature_names(Target.TTFT)
