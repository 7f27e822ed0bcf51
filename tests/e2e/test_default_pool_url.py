"""`/pools/default/...` is the unprefixed service, on both servers and for every route.

An EPP configured with TRAINING_SERVER_URL=http://svc/pools/default (a natural thing to
write) must be served by the trained default model, exactly as one configured with
http://svc is. Real processes on 127.0.0.1, after a real retrain: one trainer, one prediction
server reading its model directory and one mirroring its bundles over HTTP. Each route is
asked through both URL forms and the answers compared, less what moves by itself between two
calls (ages, load times, counters).
"""

from __future__ import annotations

import io
import json
import tarfile
from typing import Any

import httpx

from devkit.synthetic import prediction_row, synthetic_rows
from tests.e2e.cluster import Cluster, served_everywhere
from tests.polling import eventually

ROWS = [prediction_row(), prediction_row(input_token_length=4000, num_request_waiting=3)]
# Values that move between two calls on their own: ages, clocks, per-call counters.
MOVING = {
    *("model_age_seconds", "predicted_at", "processing_time_ms", "server_time"),
    *("last_seen", "seen_ago_s", "stale"),  # a prediction server's reports, every 0.2 s
}


def steady(value: Any) -> Any:
    """`value` without the fields that move on their own between two calls."""
    if isinstance(value, dict):
        return {k: steady(v) for k, v in value.items() if k not in MOVING}
    if isinstance(value, list):
        return [steady(v) for v in value]
    return value


def both_forms(base: str, method: str, path: str, body: Any = None) -> tuple[Any, Any]:
    """(unprefixed answer, /pools/default answer) of one route, each as status and JSON."""
    answers = []
    for prefix in ("", "/pools/default"):
        reply = httpx.request(method, f"{base}{prefix}{path}", json=body, timeout=20)
        answers.append((reply.status_code, steady(reply.json())))
    return answers[0], answers[1]


def exported(url: str) -> dict[str, Any]:
    """The files of an exported bundle, each as its bytes (metadata.json without the time of
    the export)."""
    reply = httpx.get(url, timeout=20)
    assert reply.status_code == 200, reply.text
    files: dict[str, Any] = {}
    with tarfile.open(fileobj=io.BytesIO(reply.content), mode="r:gz") as archive:
        for member in archive.getmembers():
            data = archive.extractfile(member)
            if data is not None:
                files[member.name] = data.read()
    files["metadata.json"] = steady(json.loads(files["metadata.json"]))
    files["metadata.json"].pop("exported_at")
    return files


def test_pools_default_is_the_unprefixed_service_on_both_servers(cluster: Cluster) -> None:
    trainer, servers = cluster
    predictors = [p.url for p in servers]
    # Half the rows through each URL form: both land in the one default pool.
    for prefix, seed in (("", 1), ("/pools/default", 2)):
        sent = httpx.post(
            f"{trainer.url}{prefix}/add_training_data_bulk",
            json={"entries": synthetic_rows(300, seed=seed)},
        )
        assert sent.status_code == 202, sent.text
    version = eventually(
        lambda: served_everywhere(trainer.url, predictors, 600),
        90.0,
        "the default pool trained on all 600 rows and served by both prediction servers",
    )
    assert version != "cold-start-prior"

    for url in predictors:
        for method, path, body in (
            ("POST", "/predict/bulk/strict", {"requests": ROWS}),
            ("POST", "/predict/bulk", {"requests": ROWS}),
            ("POST", "/predict", ROWS[1]),
            ("GET", "/", None),
            ("GET", "/readyz", None),
            ("GET", "/status", None),
            ("POST", "/reload", None),
        ):
            plain, pooled = both_forms(url, method, path, body)
            assert plain[0] == 200, (url, path, plain)
            assert pooled == plain, (url, path)
        answer = httpx.post(f"{url}/pools/default/predict/bulk/strict", json={"requests": ROWS})
        assert answer.json()["model_version"] == version

    for method, path, body in (
        ("GET", "/", None),
        ("GET", "/readyz", None),
        ("GET", "/data/status", None),
        ("GET", "/retrains", None),
        ("GET", "/model/download/info", None),
        ("GET", "/model/ttft/info", None),
        ("GET", "/models/list", None),
        ("GET", "/calibration", None),
        ("GET", "/prediction_servers", None),
        ("GET", "/advice", None),
        ("POST", "/predict", ROWS[1]),
    ):
        plain, pooled = both_forms(trainer.url, method, path, body)
        assert plain[0] in (200, 404), (path, plain)
        assert pooled == plain, path
    plain_export, pooled_export = (
        exported(f"{trainer.url}{prefix}/model/export") for prefix in ("", "/pools/default")
    )
    assert pooled_export == plain_export and "manifest.json" in plain_export
    # One pool, not two: the pool list names only `default`, with all 600 rows.
    pools = httpx.get(f"{trainer.url}/pools").json()["pools"]
    assert [p["name"] for p in pools] == ["default"]
