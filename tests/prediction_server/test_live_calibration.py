"""The live calibration file in the shared model directory: every predict route answers the
bundle's p90 times the live factor, follows each replacement, survives a bad file, and
drops the factor when the file goes away."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from prediction_server import watcher
from shared.live_calibration import LIVE_CALIBRATION
from shared.targets import Target
from tests.apps import app_of
from tests.conftest import publish_trained_bundle
from tests.polling import eventually
from tests.prediction_server.helpers import (
    WAIT_S,
    epp_rows,
    metric_value,
    running_app,
    served_version,
    strict,
    wait_serving,
)
from tests.prediction_server.test_sync import live_calibration_json

ROWS = epp_rows(8, seed=70)


def answers(client: TestClient) -> list[tuple[float, float]]:
    return [(p["ttft_ms"], p["tpot_ms"]) for p in strict(client, ROWS)["predictions"]]


def test_live_calibration_follows_the_file(model_dir: Path) -> None:
    publish_trained_bundle(model_dir, seed=1)
    path = model_dir / LIVE_CALIBRATION
    with running_app(model_dir) as client:
        plain = answers(client)
        path.write_bytes(live_calibration_json(ttft=0.3, tpot=0.1))
        eventually(
            lambda: answers(client) != plain, WAIT_S, "answers corrected by the live calibration"
        )
        first = answers(client)
        path.write_bytes(live_calibration_json(ttft=-0.2, tpot=0.0))
        eventually(
            lambda: answers(client) != first,
            WAIT_S,
            "answers corrected by the new live calibration",
        )
        second = answers(client)
        single = client.post("/predict", json=ROWS[0]).json()
        status = client.get("/status").json()["calibration"]
        factor = metric_value(client, 'latency_served_calibration_factor{target="ttft"}')
        path.write_text("{not json")  # a broken file: the last good factor keeps serving
        eventually(
            lambda: (metric_value(client, "latency_live_calibration_errors_total") or 0) > 0,
            WAIT_S,
            "the broken calibration file counted",
        )
        assert answers(client) == second
        path.unlink()
        eventually(lambda: answers(client) == plain, WAIT_S, "the bundle's own answers back")
    for (t0, p0), (t1, p1), (t2, p2) in zip(plain, first, second, strict=True):
        assert t1 == pytest.approx(t0 * math.exp(0.3), rel=1e-6)
        assert p1 == pytest.approx(p0 * math.exp(0.1), rel=1e-6)
        assert t2 == pytest.approx(t0 * math.exp(-0.2), rel=1e-6)
        assert p2 == pytest.approx(p0)
    assert single["ttft_ms"] == pytest.approx(second[0][0])
    assert factor == pytest.approx(math.exp(-0.2))
    assert status["ttft"] == {
        "bundle_log_offset": 0.0,
        "live_log_offset": -0.2,
        "live_group_log_offsets": {},
    }


def test_rows_of_a_class_with_a_factor_of_its_own_are_served_with_it(model_dir: Path) -> None:
    """A pool mixing classes (monolithic pods): b200 rows (whatever the label's case) take
    b200's factor; rows of another class, or of none, the pool's; a target the class has no
    factor for, the pool's too."""
    publish_trained_bundle(model_dir, seed=1)
    labelled = [
        {**row, "pod_class": label, "pod_type": ""}
        for row, label in zip(
            ROWS, ["B200 ", "b200", "h200", "", "b200", "h200", "", "b200"], strict=True
        )
    ]
    with running_app(model_dir) as client:
        plain = [(p["ttft_ms"], p["tpot_ms"]) for p in strict(client, labelled)["predictions"]]
        (model_dir / LIVE_CALIBRATION).write_bytes(
            live_calibration_json(ttft=0.1, tpot=-0.1, groups={"b200": {Target.TTFT: 0.5}})
        )
        eventually(
            lambda: strict(client, labelled)["predictions"][3]["ttft_ms"] != plain[3][0],
            WAIT_S,
            "the live calibration read",
        )
        served = [(p["ttft_ms"], p["tpot_ms"]) for p in strict(client, labelled)["predictions"]]
        status = client.get("/status").json()["calibration"]
    for row, (t0, p0), (t1, p1) in zip(labelled, plain, served, strict=True):
        b200 = row["pod_class"].strip().lower() == "b200"
        assert t1 == pytest.approx(t0 * math.exp(0.5 if b200 else 0.1), rel=1e-6)
        assert p1 == pytest.approx(p0 * math.exp(-0.1), rel=1e-6)
    assert status["ttft"]["live_group_log_offsets"] == {"b200": 0.5}
    assert status["tpot"]["live_group_log_offsets"] == {}


def test_factor_for_another_quantile_or_the_prior_is_not_applied(model_dir: Path) -> None:
    path = model_dir / LIVE_CALIBRATION
    path.parent.mkdir(parents=True, exist_ok=True)
    with running_app(model_dir) as client:
        prior = answers(client)
        path.write_bytes(live_calibration_json(ttft=0.5, tpot=0.5))
        eventually(
            lambda: app_of(client).state.pools.default.watcher.live.current is not None,
            WAIT_S,
            "the live calibration read",
        )
        assert answers(client) == prior  # the cold-start prior is never corrected
        publish_trained_bundle(model_dir, seed=2)
        eventually(lambda: answers(client) != prior, WAIT_S, "the trained bundle served")
        with_factor = answers(client)
        path.write_bytes(live_calibration_json(ttft=0.5, tpot=0.5, quantile=0.5))
        eventually(
            lambda: answers(client) != with_factor,
            WAIT_S,
            "answers corrected for the bundle's quantile",
        )
        for (t0, _), (t1, _) in zip(answers(client), with_factor, strict=True):
            assert t1 == pytest.approx(t0 * math.exp(0.5), rel=1e-6)


def test_rows_of_each_pd_role_and_class_take_their_groups_factor(model_dir: Path) -> None:
    """P/D: "decode" rows take the decode group's factor, "prefill/h200" rows that group's,
    a prefill row of another class and a monolithic row the pool's."""
    publish_trained_bundle(model_dir, seed=1)
    labels = [("decode", ""), ("Decode", "b200"), ("prefill", "h200"), ("prefill", "b200")]
    labelled = [
        {**row, "pod_type": role, "pod_class": pod_class}
        for row, (role, pod_class) in zip(ROWS, labels * 2, strict=True)
    ]
    with running_app(model_dir) as client:
        plain = [p["ttft_ms"] for p in strict(client, labelled)["predictions"]]
        groups = {"decode": {Target.TTFT: 0.4}, "prefill/h200": {Target.TTFT: -0.3}}
        (model_dir / LIVE_CALIBRATION).write_bytes(
            live_calibration_json(ttft=0.1, tpot=0.0, groups=groups)
        )
        eventually(
            lambda: strict(client, labelled)["predictions"][3]["ttft_ms"] != plain[3],
            WAIT_S,
            "the live calibration read",
        )
        served = [p["ttft_ms"] for p in strict(client, labelled)["predictions"]]
    # "Decode"/"b200" is group "decode/b200", which has no factor: the pool's
    expected = [0.4, 0.1, -0.3, 0.1] * 2
    for t0, t1, offset in zip(plain, served, expected, strict=True):
        assert t1 == pytest.approx(t0 * math.exp(offset), rel=1e-6)


def test_a_new_bundle_waits_for_the_live_factors_rebased_onto_it(
    model_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file names the bundle its factors correct. A newer bundle is not served with the
    factors made for the one before (wrong by what the new one corrects itself: after a
    shift by 20 % and more): it waits until the file names it, and no longer than
    PAIR_WAIT_SEC (a trainer whose live calibration stopped)."""
    path = model_dir / LIVE_CALIBRATION
    first = publish_trained_bundle(model_dir, seed=1).version
    path.write_bytes(live_calibration_json(ttft=0.3, tpot=0.1, bundle_version=first))
    with running_app(model_dir) as client:
        wait_serving(client, first)
        second = publish_trained_bundle(model_dir, seed=2).version
        time.sleep(0.5)  # ten of the watcher's looks: without the wait it serves it in one
        assert served_version(client) == first
        path.write_bytes(live_calibration_json(ttft=-0.1, tpot=0.0, bundle_version=second))
        wait_serving(client, second)
        assert client.get("/status").json()["calibration"]["ttft"]["live_log_offset"] == -0.1

        monkeypatch.setattr(watcher, "PAIR_WAIT_SEC", 0.3)
        third = publish_trained_bundle(model_dir, seed=3).version
        started = time.monotonic()
        wait_serving(client, third)  # the file never names it
        assert time.monotonic() - started >= 0.3
