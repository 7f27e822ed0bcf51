"""`pod_class` on the prediction routes: accepted everywhere, a wrong type is a 422 naming it,
and a row without it is answered byte for byte as before (the rows llm-d's EPP sends)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from devkit.synthetic import prediction_row, publish_trained_bundle
from shared.settings import ModelType
from tests.prediction_server.helpers import epp_rows, running_app

ROUTES = ("/predict/bulk/strict", "/predict/bulk", "/predict")
# What changes from one call or one load to the next: the time of the answer, of the load,
# and the server's own processing time.
VOLATILE = re.compile(rb'"(predicted_at|last_model_load|processing_time_ms)":("[^"]*"|[0-9.e+-]+)')


def post(client: Any, route: str, rows: list[dict[str, Any]]) -> Any:
    body: Any = rows[0] if route == "/predict" else {"requests": rows}
    return client.post(route, json=body)


def steady(content: bytes) -> bytes:
    return VOLATILE.sub(rb'"\1":"-"', content)


def with_classes(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    classes = ("h200", "b200", None, "", "MI300X")
    return [{**r, "pod_class": classes[i % len(classes)]} for i, r in enumerate(rows)]


@pytest.mark.parametrize("route", ROUTES)
def test_every_predict_route_accepts_it(model_dir: Path, route: str) -> None:
    publish_trained_bundle(model_dir, seed=5)
    rows = with_classes(epp_rows(10, seed=3))
    with running_app(model_dir) as client:
        for row in rows:
            answered = post(client, route, [row])
            assert answered.status_code == 200, answered.text
        bulk = post(client, route, rows)
    assert bulk.status_code == 200, bulk.text
    if route != "/predict":
        assert len(bulk.json()["predictions"]) == len(rows)
        assert all(p is not None for p in bulk.json()["predictions"])


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("value", [200, 1.5, True, ["b200"], {"class": "b200"}])
def test_a_wrong_type_is_422_naming_the_field(model_dir: Path, route: str, value: Any) -> None:
    rows = [prediction_row(), prediction_row(pod_class=value)]
    if route == "/predict":
        rows = rows[1:]
    with running_app(model_dir) as client:
        response = post(client, route, rows)
    assert response.status_code == 422
    locs = [e["loc"] for e in response.json()["detail"]]
    want = ["body", "pod_class"] if route == "/predict" else ["body", "requests", 1, "pod_class"]
    assert locs == [want]


@pytest.mark.parametrize("model_type", list(ModelType))
def test_without_it_the_answer_is_byte_for_byte_the_one_before(
    tmp_path: Path, model_type: ModelType
) -> None:
    """The same version trained on the same rows (none with a class) by the trainer before
    pod_class (its features lack the code) and now: every route answers the rows the EPP
    sends with the same bytes (but for the times), and "" or null answer as absent does."""
    rows = epp_rows(20, seed=11)
    answers: dict[str, dict[str, bytes]] = {}
    for name, without in (("before", ("pod_class_code",)), ("now", ())):
        folder = tmp_path / name
        folder.mkdir()
        publish_trained_bundle(
            folder, model_type, seed=7, version="v-same", without_features=without
        )
        with running_app(folder, model_type=model_type) as client:
            answers[name] = {route: steady(post(client, route, rows).content) for route in ROUTES}
            if name == "now":
                for empty in ("", None):
                    sent = [{**r, "pod_class": empty} for r in rows]
                    for route in ROUTES:
                        assert steady(post(client, route, sent).content) == answers[name][route]
    assert answers["now"] == answers["before"]
    assert b"pod_class" not in b"".join(answers["now"].values())


def test_an_old_bundle_serves_rows_with_a_class(model_dir: Path) -> None:
    """A bundle from before the feature: loaded and served; the class changes nothing."""
    manifest = publish_trained_bundle(model_dir, seed=5, without_features=("pod_class_code",))
    rows = epp_rows(8, seed=12)
    with running_app(model_dir) as client:
        assert client.get("/status").json()["model_version"] == manifest.version
        plain = {route: steady(post(client, route, rows).content) for route in ROUTES}
        classed = {
            route: steady(post(client, route, with_classes(rows)).content) for route in ROUTES
        }
    assert classed == plain
