"""LATENCY_LEGACY_ARTIFACTS=joblib: llm-d's ttft.joblib and tpot.joblib, on the real apps.

The files are read the way an old llm-d prediction server reads them, by llmd_reader.py in a
separate process (joblib.load, a pandas frame built from the spec); nothing in this process
unpickles them.
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from shared.artifact import bundle_dir_for, read_current_version, read_manifest, sha256_file
from shared.decoding import decode_prediction_rows
from shared.prior import prior_predict
from shared.settings import LegacyArtifacts, TrainingSettings
from shared.targets import TARGETS
from tests.conftest import training_settings
from tests.prediction_server.helpers import running_app, strict
from tests.training_server.conftest import OpenClient, ingest, train
from training_server.app import create_app
from training_server.legacy.files import PRIOR_DIR, generated_rows

READER = Path(__file__).with_name("llmd_reader.py")
ROOT = Path(__file__).resolve().parents[3]
FILES = ("ttft.joblib", "tpot.joblib")


def model_dir_of(client: TestClient) -> Path:
    return client.app.state.settings.model_dir  # type: ignore[attr-defined,no-any-return]


def llmd_predict(folder: Path, rows: list[dict[str, Any]], *flags: str) -> dict[str, np.ndarray]:
    """What an llm-d prediction server answers with the .joblib files in `folder`."""
    rows_file = folder / "rows.json"
    rows_file.write_text(json.dumps(rows))
    done = subprocess.run(
        [sys.executable, str(READER), str(folder), str(rows_file), *flags],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return {t: np.array(v) for t, v in json.loads(done.stdout).items()}


def as_rows(columns: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """Request rows (as JSON would bring them) from generated columns."""
    fractions = ("kv_cache_percentage", "prefix_cache_score")
    rows = []
    for i in range(len(columns["input_token_length"])):
        row: dict[str, Any] = {name: int(values[i]) for name, values in columns.items()}
        row.update({name: float(columns[name][i]) for name in fractions})
        row["pod_type"] = ("", "prefill", "decode")[row.pop("pod_type_code")]
        rows.append(row)
    return rows


def download(client: TestClient, folder: Path) -> Path:
    """/model/{ttft,tpot}/download into `folder`, as an llm-d prediction server syncs."""
    folder.mkdir()
    for target in ("ttft", "tpot"):
        response = client.get(f"/model/{target}/download")
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/octet-stream"
        (folder / f"{target}.joblib").write_bytes(response.content)
    return folder


def archive_members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


@pytest.fixture
def legacy_client(open_client: OpenClient) -> TestClient:
    return open_client(legacy_artifacts="joblib")


def test_from_the_first_second_the_prior_is_served_as_legacy_files(
    legacy_client: TestClient, tmp_path: Path
) -> None:
    """Before any sample an llm-d prediction server finds, lists, downloads and loads a
    TTFT and a TPOT model: the documented prior, within a few percent of its formula."""
    client = legacy_client
    listing = client.get("/models/list").json()["models"]
    prior = model_dir_of(client) / PRIOR_DIR
    for target in ("ttft", "tpot"):
        info = client.get(f"/model/{target}/info").json()
        assert info["exists"] is True and Path(info["path"]) == prior / f"{target}.joblib"
        assert info["size_bytes"] == listing[target]["size_bytes"] > 0
        assert info["last_modified"] == listing[target]["last_modified"] is not None
    assert not listing["ttft_gated"]["exists"] and not listing["manifest"]["exists"]

    rows = as_rows(generated_rows(seed=7))[:2000]
    got = llmd_predict(download(client, tmp_path / "llmd"), rows)
    for target in TARGETS:
        want = prior_predict(target, decode_prediction_rows(rows))
        error = np.abs(got[target.value] - want) / want
        assert np.median(error) < 0.03 and np.percentile(error, 95) < 0.10, target


def test_a_cold_start_exports_the_priors_legacy_files(legacy_client: TestClient) -> None:
    archive = legacy_client.get("/model/export")
    assert archive.status_code == 200
    found = archive_members(archive.content)
    assert set(found) == {"metadata.json", *FILES}
    assert all(m.mtime > 0 for m in found.values())
    refused = legacy_client.post("/model/import", content=archive.content)
    assert refused.status_code == 422 and "cold-start export" in refused.json()["detail"]


def test_every_bundle_carries_checksummed_legacy_files(legacy_client: TestClient) -> None:
    client = legacy_client
    version = train(client)["model_version"]
    folder = bundle_dir_for(model_dir_of(client), version)
    manifest = read_manifest(folder)
    assert manifest.legacy_files == {name: sha256_file(folder / name) for name in FILES}
    for target in ("ttft", "tpot"):
        info = client.get(f"/model/{target}/info").json()
        assert Path(info["path"]) == folder / f"{target}.joblib"
        assert (
            client.get(f"/model/{target}/download").content
            == (folder / f"{target}.joblib").read_bytes()
        )
        # our own model files are still served by their own routes and exported
        assert client.get(f"/model/{target}/xgb/json").status_code == 200
    found = archive_members(client.get("/model/export").content)
    assert set(found) == {"metadata.json", "manifest.json", "ttft.json", "tpot.json", *FILES}
    assert not any("gated" in name for name in found)
    assert all(m.mtime > 0 for m in found.values())


def test_legacy_files_cover_held_out_rows_as_our_p90s_do(
    open_client: OpenClient, tmp_path: Path
) -> None:
    """The files answer p90s in ms: on rows neither saw, their coverage is within 0.05 of
    the coverage of the p90s our prediction server serves from the same bundle."""
    client = open_client(legacy_artifacts="joblib", n_estimators=100)
    ingest(client, synthetic_rows(4000, seed=11))
    assert client.post("/retrain").json()["outcome"] == "ok"
    held_out = synthetic_rows(3000, seed=12)
    requests = [{k: v for k, v in r.items() if not k.startswith("actual_")} for r in held_out]
    llmd = llmd_predict(download(client, tmp_path / "llmd"), requests)
    with running_app(model_dir_of(client)) as prediction:
        ours = strict(prediction, requests)["predictions"]
    for target in TARGETS:
        actual = np.array([r[target.actual_field] for r in held_out])
        measured = actual > 0
        served = np.array([p[f"{target.value}_ms"] for p in ours])[measured]
        legacy = llmd[target.value][measured]
        ours_coverage = np.mean(actual[measured] <= served)
        legacy_coverage = np.mean(actual[measured] <= legacy)
        assert abs(legacy_coverage - ours_coverage) <= 0.05, (
            target,
            ours_coverage,
            legacy_coverage,
        )
        # and they rank rows as our model does: a model, not a constant p90
        assert np.corrcoef(np.log(legacy), np.log(served))[0, 1] > 0.8, target


def test_the_columns_follow_the_feature_switches(open_client: OpenClient, tmp_path: Path) -> None:
    client = open_client(
        legacy_artifacts="joblib",
        enable_token_in_flight_features=False,
        enable_encoder_features=False,
    )
    train(client)
    rows = [
        {k: v for k, v in r.items() if not k.startswith("actual_")}
        for r in synthetic_rows(20, seed=3)
    ]
    folder = download(client, tmp_path / "llmd")
    got = llmd_predict(folder, rows, "--no-token-in-flight", "--no-encoder")
    assert all(np.all(np.isfinite(v)) and np.ptp(v) > 0 for v in got.values())
    done = subprocess.run(
        [sys.executable, str(READER), str(folder), str(folder / "rows.json")],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode != 0 and "feature_names mismatch" in done.stderr


def test_an_import_verifies_the_legacy_files(
    legacy_client: TestClient, open_client: OpenClient
) -> None:
    train(legacy_client)
    archive = legacy_client.get("/model/export").content
    fresh = open_client(name="b")
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as src,
        tarfile.open(fileobj=out, mode="w:gz") as dst,
    ):
        for member in src.getmembers():
            data = src.extractfile(member).read()  # type: ignore[union-attr]
            if member.name == "ttft.joblib":
                data = data[:-1] + bytes([data[-1] ^ 1])
            dst.addfile(member, io.BytesIO(data))
    refused = fresh.post("/model/import", content=out.getvalue())
    assert refused.status_code == 422
    assert "checksum mismatch for ttft.joblib" in refused.json()["detail"]
    assert fresh.post("/model/import", content=archive).status_code == 200
    version = read_current_version(model_dir_of(fresh))
    assert version is not None
    assert read_manifest(bundle_dir_for(model_dir_of(fresh), version)).legacy_files


def test_turning_the_flag_on_retrains_a_bundle_that_lacks_the_files(tmp_path: Path) -> None:
    """A restart with the flag on: the published bundle has no legacy files, so the next
    retrain runs on the stored rows even though no new sample arrived."""
    settings = training_settings(tmp_path, f"sqlite:///{tmp_path / 'store.db'}")
    with TestClient(create_app(settings, start_loop=False)) as before:
        version = train(before)["model_version"]
    on = settings.model_copy(update={"legacy_artifacts": LegacyArtifacts.JOBLIB})
    with TestClient(create_app(on, start_loop=False)) as after:
        assert after.get("/model/ttft/info").json()["exists"] is False  # not in that bundle
        assert after.post("/retrain").json()["outcome"] == "ok"  # no new sample needed
        assert after.get("/data/status").json()["model_version"] != version
        assert after.get("/model/ttft/info").json()["exists"] is True
        assert after.post("/retrain").json()["outcome"] == "skipped"  # and that is all


def test_the_flag_without_the_libraries_is_refused_at_start_up(tmp_path: Path) -> None:
    """As where the `legacy` extra is not installed: one clear line, exit 1."""
    probe = (
        "import sys; sys.modules['joblib'] = None; "
        "from training_server.__main__ import main; main([])"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={
            "PATH": "/usr/bin:/bin",
            "LATENCY_LEGACY_ARTIFACTS": "joblib",
            "LATENCY_MODEL_DIR": str(tmp_path),
        },
        check=False,
    )
    assert done.returncode == 1
    assert (
        "LATENCY_LEGACY_ARTIFACTS=joblib needs joblib: pip install "
        "'latency-predictor[legacy]'" in done.stderr
    )
    assert "Traceback" not in done.stderr
    assert TrainingSettings().legacy_artifacts is LegacyArtifacts.NONE  # off by default


def test_no_pickle_is_ever_loaded_by_the_project() -> None:
    loads = []
    for package in ("shared", "training_server", "prediction_server", "latency_cli"):
        for path in sorted((ROOT / package).rglob("*.py")):
            text = path.read_text()
            loads += [
                f"{path.relative_to(ROOT)}: {call}"
                for call in ("joblib.load", "pickle.load", "cloudpickle", "dill.load")
                if call in text
            ]
    assert loads == []


def test_each_target_without_a_model_ships_the_priors_file(open_client: OpenClient) -> None:
    """A retrain with rows for one target only: the other target's file is the prior's."""
    client = open_client(legacy_artifacts="joblib")
    ttft_only = [r for r in synthetic_rows(600, seed=5) if r["actual_ttft_ms"] > 0]
    ingest(client, ttft_only)
    assert client.post("/retrain").json()["outcome"] == "ok"
    folder = bundle_dir_for(
        model_dir_of(client), client.get("/data/status").json()["model_version"]
    )
    prior = model_dir_of(client) / PRIOR_DIR
    assert (folder / "tpot.joblib").read_bytes() == (prior / "tpot.joblib").read_bytes()
    assert (folder / "ttft.joblib").read_bytes() != (prior / "ttft.joblib").read_bytes()


def test_prior_files_keep_their_mtime_across_restarts(
    open_client: OpenClient, tmp_path: Path
) -> None:
    """llm-d servers download when the mtime moves: a restart must not move it."""
    first = open_client(name="a", legacy_artifacts="joblib")
    path = model_dir_of(first) / PRIOR_DIR / "ttft.joblib"
    stamp = path.stat().st_mtime_ns
    open_client(name="b", legacy_artifacts="joblib", model_dir=model_dir_of(first))
    assert path.stat().st_mtime_ns == stamp
