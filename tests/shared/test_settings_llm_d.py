"""Settings derived from the variables llm-d's Helm chart sets, when ours are unset
(docs/llm-d-chart.md): directories from LATENCY_TTFT_MODEL_PATH and
LOCAL_TTFT_MODEL_PATH, workers from UVICORN_WORKERS, and where a prediction server's bundles
come from (the trainer publishing into its directory, or mirrored over HTTP)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from shared import artifact
from shared.model_source import CURRENT_FILE, MIRROR_MARKER, ModelSource, model_source_for
from shared.settings import LLM_D_HOME, PredictionSettings, TrainingSettings, env_names
from tests.unprivileged import NOBODY, python_for

URL = "http://localhost:8000"
CHART_FILES = {"ttft.joblib", "tpot.joblib", "ttft_scaler.joblib", "tpot_scaler.joblib"}
SetEnv = Callable[..., None]


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> SetEnv:
    """Set environment variables for one test, with every name these settings read (ours
    and llm-d's) unset first, whatever the shell running the tests has."""
    for name in env_names(TrainingSettings) | env_names(PredictionSettings):
        monkeypatch.delenv(name, raising=False)

    def set_env(**values: str) -> None:
        for name, value in values.items():
            monkeypatch.setenv(name, value)

    return set_env


def test_the_trainer_keeps_its_store_and_models_beside_llm_d_s_model_file(env: SetEnv) -> None:
    env(LATENCY_TTFT_MODEL_PATH="/models/ttft.joblib")
    settings = TrainingSettings()
    assert settings.model_dir == Path("/models") / LLM_D_HOME / "models"
    assert settings.db_url == f"sqlite:////models/{LLM_D_HOME}/latency.db"
    source = "LATENCY_TTFT_MODEL_PATH=/models/ttft.joblib"
    assert [(d.name, d.source) for d in settings.derived] == [
        ("LATENCY_MODEL_DIR", source),
        ("LATENCY_DB_URL", source),
    ]
    assert settings.startup_lines() == [
        f"LATENCY_MODEL_DIR=/models/{LLM_D_HOME}/models (derived from {source})",
        f"LATENCY_DB_URL=sqlite:////models/{LLM_D_HOME}/latency.db (derived from {source})",
    ]
    # Everything of ours lies in one folder of its own: no name llm-d's tools use there.
    assert LLM_D_HOME not in CHART_FILES and settings.model_dir.parts[2] == LLM_D_HOME


def test_our_own_settings_win_over_llm_d_s(env: SetEnv, tmp_path: Path) -> None:
    env(
        LATENCY_TTFT_MODEL_PATH="/models/ttft.joblib",
        LATENCY_MODEL_DIR=str(tmp_path / "m"),
        LATENCY_DB_URL="postgresql+psycopg://u@db/latency",
    )
    settings = TrainingSettings()
    assert settings.model_dir == tmp_path / "m"
    assert settings.db_url == "postgresql+psycopg://u@db/latency"
    assert settings.derived == ()


def test_without_llm_d_s_variables_the_defaults_are_as_before(env: SetEnv) -> None:
    training = TrainingSettings()
    assert (training.model_dir, training.db_url) == (
        Path("./var/models"),
        "sqlite:///./var/latency.db",
    )
    assert training.derived == () and training.startup_lines() == []
    prediction = PredictionSettings()
    assert prediction.derived == () and prediction.workers == 0
    assert prediction.model_source is ModelSource.SHARED_DIR
    assert prediction.startup_lines() == ["model source: shared-dir (no TRAINING_SERVER_URL)"]


def test_a_prediction_server_uses_its_own_volume(env: SetEnv, tmp_path: Path) -> None:
    env(LOCAL_TTFT_MODEL_PATH=str(tmp_path / "server_models" / "ttft.joblib"))
    settings = PredictionSettings()
    assert settings.model_dir == tmp_path / "server_models" / LLM_D_HOME / "models"
    assert settings.derived[0].name == "LATENCY_MODEL_DIR"
    assert settings.derived[0].source.startswith("LOCAL_TTFT_MODEL_PATH=")


def test_uvicorn_workers_sets_the_count_unless_latency_workers_does(env: SetEnv) -> None:
    env(UVICORN_WORKERS="3")
    settings = PredictionSettings()
    assert settings.workers == 3
    assert "LATENCY_WORKERS=3 (derived from UVICORN_WORKERS=3)" in settings.startup_lines()
    env(LATENCY_WORKERS="1")
    settings = PredictionSettings()
    assert settings.workers == 1 and settings.derived == ()
    assert "UVICORN_WORKERS=3 ignored: LATENCY_WORKERS wins" in settings.startup_lines()


def test_a_bad_uvicorn_workers_is_refused_by_name(env: SetEnv) -> None:
    env(UVICORN_WORKERS="0")
    with pytest.raises(ValidationError, match="UVICORN_WORKERS"):
        PredictionSettings()


@pytest.fixture
def models(tmp_path: Path) -> Path:
    path = tmp_path / "server_models" / LLM_D_HOME / "models"
    path.mkdir(parents=True)
    return path


def test_knowing_the_trainer_with_nothing_published_here_mirrors_from_it(
    env: SetEnv, models: Path
) -> None:
    env(TRAINING_SERVER_URL=URL, LATENCY_MODEL_DIR=str(models))
    settings = PredictionSettings()
    assert settings.sync_from_trainer is True
    assert settings.model_source is ModelSource.TRAINER_SYNC
    assert "no trainer-published CURRENT" in settings.model_source_reason
    assert URL in settings.model_source_reason
    (derived,) = settings.derived
    assert (derived.name, derived.value) == ("LATENCY_SYNC_FROM_TRAINER", "true")
    assert settings.startup_lines()[-1].startswith("model source: trainer-sync (no trainer-")


def test_a_directory_the_trainer_publishes_into_is_read_as_it_is(env: SetEnv, models: Path) -> None:
    (models / CURRENT_FILE).write_text("20260101T000000.000000Z\n")
    env(TRAINING_SERVER_URL=URL, LATENCY_MODEL_DIR=str(models))
    settings = PredictionSettings()
    assert settings.sync_from_trainer is False and settings.derived == ()
    assert settings.model_source is ModelSource.SHARED_DIR
    assert "holds a CURRENT the trainer published" in settings.model_source_reason


def test_after_a_restart_a_mirror_goes_on_mirroring(env: SetEnv, models: Path) -> None:
    """The chart's emptyDir survives a container restart: the CURRENT there is our copy."""
    (models / CURRENT_FILE).write_text("20260101T000000.000000Z\n")
    (models / MIRROR_MARKER).write_text(URL)
    env(TRAINING_SERVER_URL=URL, LATENCY_MODEL_DIR=str(models))
    settings = PredictionSettings()
    assert settings.sync_from_trainer is True
    assert settings.model_source is ModelSource.TRAINER_SYNC
    assert "mirrored from the trainer" in settings.model_source_reason


@pytest.mark.parametrize(
    ("value", "url", "source", "reason"),
    [
        ("false", URL, ModelSource.SHARED_DIR, "LATENCY_SYNC_FROM_TRAINER=false"),
        ("true", URL, ModelSource.TRAINER_SYNC, "LATENCY_SYNC_FROM_TRAINER=true"),
        ("true", None, ModelSource.SHARED_DIR, "but no TRAINING_SERVER_URL"),
    ],
)
def test_latency_sync_from_trainer_decides_when_set(
    env: SetEnv, models: Path, value: str, url: str | None, source: ModelSource, reason: str
) -> None:
    env(LATENCY_SYNC_FROM_TRAINER=value, LATENCY_MODEL_DIR=str(models))
    if url:
        env(TRAINING_SERVER_URL=url)
    settings = PredictionSettings()
    assert (settings.model_source, settings.derived) == (source, ())
    assert reason in settings.model_source_reason
    assert settings.sync_from_trainer is (value == "true")


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A directory another user can reach (pytest's tmp_path is root's only)."""
    root = Path(tempfile.mkdtemp(prefix="settings-"))
    root.chmod(0o755)
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_a_read_only_directory_is_the_trainer_s_to_publish_into(shared_root: Path) -> None:
    """As in our own k8s overlays, which mount the trainer's volume read-only: no mirroring
    into it, even before the trainer published anything."""
    models = shared_root / "models"
    models.mkdir(mode=0o555)
    models.chmod(0o555)
    if os.geteuid() != 0:
        source, reason = model_source_for(models, URL, None)
    else:  # root may write anywhere: ask as nobody
        probe = (
            "import json, pathlib, shared.model_source as m; "
            f"print(json.dumps(m.model_source_for(pathlib.Path({str(models)!r}), {URL!r}, None)))"
        )
        done = subprocess.run(
            [python_for(NOBODY, shared_root), "-c", probe],
            user=NOBODY[0], group=NOBODY[1], extra_groups=[],
            capture_output=True, text=True, timeout=120, check=True, cwd="/",
        )  # fmt: skip
        source, reason = json.loads(done.stdout)
    assert source == ModelSource.SHARED_DIR
    assert "read-only" in reason


def test_current_is_the_name_artifact_publishes() -> None:
    assert CURRENT_FILE == artifact.CURRENT_POINTER
