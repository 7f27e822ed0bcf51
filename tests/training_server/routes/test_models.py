"""Training-server model routes: download info, tree dumps, files, export and import."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import prediction_row, synthetic_rows
from shared.artifact import read_current_version
from shared.features import CARRIED_ONLY, feature_names
from shared.settings import TrainingSettings
from shared.targets import Target
from tests.apps import app_of
from tests.training_server.conftest import OpenClient, train


def model_dir_of(client: TestClient) -> Path:
    settings: TrainingSettings = app_of(client).state.settings
    return settings.model_dir


def test_download_info_before_any_model(client: TestClient) -> None:
    info = client.get("/model/download/info").json()
    assert info["model_status"] == {"ttft_model_ready": False, "tpot_model_ready": False}
    assert (info["model_type"], info["objective_type"], info["quantile"]) == (
        "xgboost",
        "quantile",
        0.9,
    )
    assert info["model_version"] is None
    assert client.get("/model/ttft/xgb/json").status_code == 404
    assert client.get("/model/ttft/download").status_code == 404
    listing = client.get("/models/list").json()["models"]
    assert {name: entry["exists"] for name, entry in listing.items()} == {
        "ttft": False,
        "tpot": False,
        "manifest": False,
        "ttft_gated": False,
        "tpot_gated": False,
    }
    assert client.get("/model/ttft/info").json()["exists"] is False


@pytest.mark.parametrize("name", ["ttft_gated", "tpot_gated"])
def test_gated_ensemble_names_are_listed_and_never_present(trained: TestClient, name: str) -> None:
    """llm-d's queue-gated ensemble: tools list and probe the names; we serve no such model."""
    assert trained.get("/models/list").json()["models"][name] == {
        "exists": False,
        "size_bytes": 0,
        "last_modified": None,
    }
    info = trained.get(f"/model/{name}/info")
    assert info.status_code == 200
    assert (info.json()["model_name"], info.json()["exists"], info.json()["path"]) == (
        name,
        False,
        None,
    )
    assert trained.get(f"/model/{name}/download").status_code == 404


def test_xgboost_download_info_and_tree_dumps(trained: TestClient) -> None:
    info = trained.get("/model/download/info").json()
    assert info["available_endpoints"] == {
        "trees": {"ttft_trees": "/model/ttft/xgb/json", "tpot_trees": "/model/tpot/xgb/json"}
    }
    assert info["model_status"] == {"ttft_model_ready": True, "tpot_model_ready": True}
    assert all(type(v) is bool for v in info["model_status"].values())
    assert info["model_version"] == read_current_version(model_dir_of(trained))
    for target in ("ttft", "tpot"):
        response = trained.get(info["available_endpoints"]["trees"][f"{target}_trees"])
        assert response.status_code == 200
        assert response.headers["content-type"] == "application/json"
        trees = response.json()
        assert isinstance(trees, list) and len(trees) == 30  # n_estimators in the test settings
        assert all(isinstance(t, dict) and t["nodeid"] == 0 for t in trees)
        split_node = next(t for t in trees if "children" in t)
        assert {"split", "split_condition", "yes", "no", "missing", "depth"} <= set(split_node)
    for path in ("/model/ttft/lgb/txt", "/model/tpot/lgb/txt", "/model/ttft/lgb/importances"):
        assert trained.get(path).status_code == 404, path
    assert trained.get("/model/latency/xgb/json").status_code == 422


def test_lightgbm_text_and_importances(open_client: OpenClient) -> None:
    client = open_client(model_type="lightgbm", objective_type="mean")
    train(client)
    info = client.get("/model/download/info").json()
    assert (info["model_type"], info["objective_type"]) == ("lightgbm", "mean")
    assert info["available_endpoints"] == {
        "text": {"ttft": "/model/ttft/lgb/txt", "tpot": "/model/tpot/lgb/txt"}
    }
    for target in Target:
        text = client.get(f"/model/{target.value}/lgb/txt")
        assert text.status_code == 200
        assert text.headers["content-type"] == "text/plain; charset=utf-8"
        assert text.text.startswith("tree")
        importances = client.get(f"/model/{target.value}/lgb/importances").json()
        # The rows carry no pod_class, so the bundle does not list its code
        assert list(importances) == [n for n in feature_names(target) if n not in CARRIED_ONLY]
        assert all(isinstance(v, float) for v in importances.values())
        assert sum(importances.values()) > 0
        assert client.get(f"/model/{target.value}/xgb/json").status_code == 404


def test_model_info_download_and_list(trained: TestClient) -> None:
    version = read_current_version(model_dir_of(trained))
    assert version is not None
    bundle_dir = model_dir_of(trained) / "versions" / version
    for name in ("ttft", "tpot", "manifest"):
        info = trained.get(f"/model/{name}/info").json()
        assert info["model_name"] == name and info["exists"] is True
        assert info["size_bytes"] == Path(info["path"]).stat().st_size > 0
        assert Path(info["path"]).parent == bundle_dir
        assert info["last_modified"].endswith("Z")
        assert (info["model_type"], info["quantile"], info["model_version"]) == (
            "xgboost",
            0.9,
            version,
        )
    assert trained.get("/model/unknown/info").status_code == 404
    assert trained.get("/model/unknown/download").status_code == 404

    download = trained.get("/model/ttft/download")
    assert download.status_code == 200
    assert download.headers["content-type"] == "application/octet-stream"
    assert download.content == (bundle_dir / "ttft.json").read_bytes()
    manifest = json.loads(trained.get("/model/manifest/download").content)
    assert manifest["version"] == version

    listing = trained.get("/models/list").json()
    present = {name: m for name, m in listing["models"].items() if "gated" not in name}
    assert set(present) == {"ttft", "tpot", "manifest"}
    assert all(m["exists"] and m["size_bytes"] > 0 for m in present.values())
    assert (listing["model_type"], listing["quantile"]) == ("xgboost", 0.9)
    assert listing["server_time"].endswith("Z")


def export(client: TestClient) -> bytes:
    response = client.get("/model/export")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/gzip"
    return response.content


def members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {m.name: m for m in tar.getmembers()}


def read_member(archive: bytes, name: str) -> bytes:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        member = tar.extractfile(name)
        assert member is not None
        return member.read()


def test_export_is_a_tar_gz_with_manifest_and_metadata(trained: TestClient) -> None:
    version = read_current_version(model_dir_of(trained))
    archive = export(trained)
    found = members(archive)
    assert set(found) == {"manifest.json", "metadata.json", "ttft.json", "tpot.json"}
    assert all(m.mtime > 0 and m.isfile() for m in found.values())
    metadata = json.loads(read_member(archive, "metadata.json"))
    manifest = json.loads(read_member(archive, "manifest.json"))
    assert (metadata["model_type"], metadata["quantile_alpha"]) == ("xgboost", 0.9)
    assert metadata["exported_at"].endswith("Z") and metadata["model_version"] == version
    assert metadata["cold_start"] is False
    counts = trained.get("/data/status").json()
    assert metadata["sample_counts"]["training_data"] == counts["training_data"]
    assert (metadata["ttft_samples"], metadata["tpot_samples"]) == (
        counts["training_data"]["ttft_samples"],
        counts["training_data"]["tpot_samples"],
    )
    assert manifest["version"] == version


def test_a_cold_start_exports_its_prior_and_import_refuses_it(
    client: TestClient, open_client: OpenClient
) -> None:
    """From the first second: a tar.gz whose metadata names the documented prior; it holds
    no model, so importing it is refused with the reason, and nothing is published."""
    client.post("/add_training_data_bulk", json={"entries": synthetic_rows(3)})
    archive = export(client)
    found = members(archive)
    assert set(found) == {"metadata.json"}
    assert found["metadata.json"].mtime > 0
    metadata = json.loads(read_member(archive, "metadata.json"))
    assert (metadata["model_version"], metadata["cold_start"]) == ("cold-start-prior", True)
    assert (metadata["model_type"], metadata["quantile_alpha"]) == ("xgboost", 0.9)
    assert metadata["ttft_samples"] + metadata["tpot_samples"] == sum(
        metadata["sample_counts"]["training_data"][f"{t}_samples"] for t in ("ttft", "tpot")
    )
    assert (
        metadata["sample_counts"]["training_data"]["total_samples"]
        + metadata["sample_counts"]["test_data"]["total_samples"]
        == 3
    )

    fresh = open_client(name="b")
    response = fresh.post("/model/import", content=archive)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(
        "bundle refused: a cold-start export holds no trained model to import"
    )
    assert read_current_version(model_dir_of(fresh)) is None


def test_import_seeds_an_empty_server(trained: TestClient, open_client: OpenClient) -> None:
    archive = export(trained)
    version = read_current_version(model_dir_of(trained))
    fresh = open_client(name="b")
    assert fresh.get("/model/download/info").json()["model_status"]["ttft_model_ready"] is False

    response = fresh.post("/model/import", content=archive)
    assert response.status_code == 200, response.text
    assert response.json() == {"imported": True, "model_version": version}
    info = fresh.get("/model/download/info").json()
    assert info["model_status"] == {"ttft_model_ready": True, "tpot_model_ready": True}
    assert info["model_version"] == version
    assert read_current_version(model_dir_of(fresh)) == version
    assert fresh.post("/predict", json=prediction_row()).json()["model_version"] == version
    assert fresh.get("/model/ttft/xgb/json").json() == trained.get("/model/ttft/xgb/json").json()


def tampered(archive: bytes) -> bytes:
    """The same archive with one byte of ttft.json changed (its checksum no longer matches)."""
    out = io.BytesIO()
    with (
        tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as src,
        tarfile.open(fileobj=out, mode="w:gz") as dst,
    ):
        for member in src.getmembers():
            content = src.extractfile(member)
            assert content is not None, member.name  # a bundle holds regular files only
            data = content.read()
            if member.name == "ttft.json":
                data = data.replace(b"0", b"1", 1)
            member.size = len(data)
            dst.addfile(member, io.BytesIO(data))
    return out.getvalue()


@pytest.mark.parametrize("kind", ["garbage", "empty", "tampered"])
def test_import_refuses_bad_archives(
    trained: TestClient, open_client: OpenClient, kind: str
) -> None:
    archive = {
        "garbage": b"definitely not a tarball",
        "empty": b"",
        "tampered": tampered(export(trained)) if kind == "tampered" else b"",
    }[kind]
    fresh = open_client(name="b")
    response = fresh.post("/model/import", content=archive)
    assert response.status_code == 422
    assert "bundle refused" in response.json()["detail"]
    assert fresh.get("/model/download/info").json()["model_version"] is None
    assert read_current_version(model_dir_of(fresh)) is None
