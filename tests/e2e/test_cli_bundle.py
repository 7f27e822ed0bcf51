"""`latency-predictor export` and `import` with real servers on 127.0.0.1: an export imported
into an empty model directory seeds a prediction server's cold start; a training server with
no model exports its cold start (the prior, which import refuses) until a bundle is
imported; broken archives are refused."""

from __future__ import annotations

import io
import json
import tarfile
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row
from tests.e2e.test_cli_status import cli, server_env, started, train

ROW = prediction_row(input_token_length=1200, num_request_waiting=2, num_request_running=9)

Trainer = tuple[ServerProcess, str]  # the training server, its trained version
Export = tuple[Path, str]  # the exported archive, its version


@pytest.fixture(scope="module")
def trainer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Trainer]:
    folder = tmp_path_factory.mktemp("bundle-trainer")
    server = started("training_server", server_env(folder), folder / "training.log")
    try:
        yield server, train(server.url)
    finally:
        server.stop()


@pytest.fixture(scope="module")
def exported(trainer: Trainer, tmp_path_factory: pytest.TempPathFactory) -> Export:
    """`latency-predictor export` into an empty folder: the server's file name is used."""
    server, version = trainer
    folder = tmp_path_factory.mktemp("export")
    done = cli("export", "--url", server.url, cwd=folder)
    assert done.returncode == 0, done.stdout + done.stderr
    archive = folder / f"model-{version}.tar.gz"
    assert [p.name for p in folder.iterdir()] == [archive.name]  # no temporary file left
    assert done.stdout.startswith(f"exported model {version} to {archive.name} (")
    assert done.stdout.rstrip().endswith(" KiB)")
    return archive, version


def tampered(archive: Path, name: str) -> bytes:
    """The archive again with one byte of `name` changed (its manifest checksum kept)."""
    out = io.BytesIO()
    with tarfile.open(archive, "r:gz") as src, tarfile.open(fileobj=out, mode="w:gz") as dst:
        for member in src.getmembers():
            content = src.extractfile(member)
            assert content is not None, member.name  # a bundle holds regular files only
            data = content.read()
            if member.name == name:
                data = data[:-1] + (b" " if data[-1:] != b" " else b"\n")
            dst.addfile(member, io.BytesIO(data))
    return out.getvalue()


def test_export_to_a_named_file_and_into_a_directory(trainer: Trainer, tmp_path: Path) -> None:
    server, version = trainer
    done = cli("export", "--url", server.url, "-o", str(tmp_path / "bundle.tgz"))
    assert done.returncode == 0, done.stderr
    with tarfile.open(tmp_path / "bundle.tgz", "r:gz") as tar:
        assert {"manifest.json", "metadata.json"} <= set(tar.getnames())
        content = tar.extractfile("metadata.json")
        assert content is not None
        metadata = json.load(content)
    assert metadata["model_version"] == version
    (tmp_path / "dir").mkdir()
    assert cli("export", "--url", server.url, "-o", str(tmp_path / "dir")).returncode == 0
    assert (tmp_path / "dir" / f"model-{version}.tar.gz").is_file()


def test_import_into_an_empty_model_dir_seeds_a_cold_start(
    trainer: Trainer, exported: Export, tmp_path: Path
) -> None:
    server, version = trainer
    archive, _ = exported
    volume = tmp_path / "empty-volume"
    volume.mkdir()
    done = cli("import", str(archive), "--model-dir", str(volume))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"imported model {version} into {volume}: published")
    assert (volume / "CURRENT").read_text().strip() == version

    # A prediction server started on that directory alone serves the imported version.
    env = server_env(tmp_path, model_dir=volume)
    predictor = started("prediction_server", env, tmp_path / "prediction.log")
    try:
        status = httpx.get(f"{predictor.url}/status", timeout=10).json()
        answer = httpx.post(f"{predictor.url}/predict", json=ROW, timeout=10).json()
        on_trainer = httpx.post(f"{server.url}/predict", json=ROW, timeout=10).json()
        report = json.loads(
            cli(
                "status", "--training-url", server.url, "--prediction-url", predictor.url, "--json"
            ).stdout
        )
    finally:
        predictor.stop()
    assert status["model_version"] == version and status["cold_start"] is False
    assert (answer["ttft_ms"], answer["tpot_ms"]) == (on_trainer["ttft_ms"], on_trainer["tpot_ms"])
    assert report["prediction"][0]["lags_trainer"] is False


def test_a_trainer_without_a_model_exports_its_cold_start_until_an_import(
    exported: Export, tmp_path: Path
) -> None:
    """A cold start exports (from its first second) an archive naming the documented prior;
    it holds no model, so importing it is refused with the reason."""
    archive, version = exported
    fresh = started("training_server", server_env(tmp_path), tmp_path / "fresh.log")
    try:
        done = cli("export", "--url", fresh.url, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        cold = tmp_path / "model-cold-start-prior.tar.gz"
        assert done.stdout.startswith(f"exported model cold-start-prior to {cold.name} (")
        with tarfile.open(cold, "r:gz") as tar:
            assert tar.getnames() == ["metadata.json"]
        done = cli("import", str(cold), "--url", fresh.url)
        assert done.returncode == 1
        assert "bundle refused: a cold-start export holds no trained model" in done.stderr
        cold.unlink()
        assert not list(tmp_path.glob(".*.part"))

        broken = tmp_path / "broken.tar.gz"
        broken.write_bytes(archive.read_bytes()[:2000])
        done = cli("import", str(broken), "--url", fresh.url)
        assert done.returncode == 1
        assert "bundle refused: not a readable tar.gz bundle" in done.stderr
        assert httpx.get(f"{fresh.url}/data/status").json()["model_version"] is None

        done = cli("import", str(archive), "--url", fresh.url)
        assert done.returncode == 0, done.stderr
        assert done.stdout.startswith(f"imported model {version} into the training server")
        assert httpx.get(f"{fresh.url}/data/status").json()["model_version"] == version
        assert cli("export", "--url", fresh.url, cwd=tmp_path).returncode == 0
        assert (tmp_path / archive.name).is_file()
    finally:
        fresh.stop()


def test_corrupted_archives_are_refused_locally(exported: Export, tmp_path: Path) -> None:
    archive, version = exported
    cases = {
        "truncated.tar.gz": (archive.read_bytes()[:1500], "not a readable tar.gz bundle"),
        "garbage.tar.gz": (b"this is not an archive", "not a readable tar.gz bundle"),
        "tampered.tar.gz": (
            tampered(archive, "ttft.json"),
            f"{version}: checksum mismatch for ttft.json",
        ),
    }
    volume = tmp_path / "volume"
    for name, (data, reason) in cases.items():
        (tmp_path / name).write_bytes(data)
        done = cli("import", str(tmp_path / name), "--model-dir", str(volume))
        assert done.returncode == 1, name
        assert done.stderr.startswith("latency-predictor import: bundle refused: "), done.stderr
        assert reason in done.stderr, done.stderr
        assert "Traceback" not in done.stderr
    assert not (volume / "CURRENT").exists()
    assert list((volume / "versions").iterdir()) == []  # nothing staged was left behind


def test_a_trainer_that_is_down_or_a_missing_file(exported: Export, tmp_path: Path) -> None:
    archive, _ = exported
    url = f"http://127.0.0.1:{free_port()}"
    done = cli("export", "--url", url, cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"latency-predictor export: cannot reach the training server at {url}: connection refused"
    )
    assert list(tmp_path.iterdir()) == []
    done = cli("import", str(archive), "--url", url)
    assert done.returncode == 1
    assert f"cannot reach the training server at {url}: connection refused" in done.stderr
    done = cli("import", str(tmp_path / "missing.tar.gz"), "--model-dir", str(tmp_path))
    assert done.returncode == 1 and "cannot read" in done.stderr
    both = cli("import", str(archive), "--url", url, "--model-dir", str(tmp_path))
    assert both.returncode == 2 and "not allowed with argument" in both.stderr
