"""Fixtures: real SQLite files, a real PostgreSQL schema per test, real trained bundles."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from devkit.synthetic import publish_trained_bundle
from shared.settings import ModelType, ObjectiveType, TrainingSettings
from shared.targets import Target
from tests.postgres_server import EmbeddedPostgres, answers, start_embedded
from training_server.db import make_engine
from training_server.migrate import upgrade
from training_server.store import SampleStore

# The PostgreSQL the suite uses: LATENCY_TEST_PG_URL, or the server on 127.0.0.1:5432; when
# that does not answer, pytest_configure starts our own (tests/postgres_server.py) and
# points PG_URL at it. Test modules read PG_URL after configuration (at collection).
PG_URL = os.environ.get("LATENCY_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
SKIP_PG = os.environ.get("LATENCY_TEST_SKIP_POSTGRES") == "1"
_EMBEDDED: list[EmbeddedPostgres] = []


def pytest_configure(config: pytest.Config) -> None:
    global PG_URL
    if SKIP_PG or answers(PG_URL):
        return
    server = start_embedded()
    _EMBEDDED.append(server)
    PG_URL = server.url
    print(f"\nno PostgreSQL answered; started our own at {PG_URL}")  # noqa: T201


def pytest_unconfigure(config: pytest.Config) -> None:
    while _EMBEDDED:
        _EMBEDDED.pop().stop()


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'store.db'}"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    """A fresh schema on the real server, dropped afterwards."""
    if SKIP_PG:
        pytest.skip("LATENCY_TEST_SKIP_POSTGRES=1")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = create_engine(PG_URL)
    try:
        with admin.begin() as conn:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    except OperationalError as exc:
        pytest.fail(
            f"PostgreSQL is not reachable at {PG_URL} ({exc.orig}); start it (.ci/run does) "
            "or set LATENCY_TEST_SKIP_POSTGRES=1 to skip these tests knowingly"
        )
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest) -> str:
    url: str = request.getfixturevalue(f"{request.param}_url")
    return url


@pytest.fixture
def migrated_url(db_url: str) -> str:
    upgrade(db_url)
    return db_url


@pytest.fixture
def store(migrated_url: str) -> Iterator[SampleStore]:
    engine = make_engine(migrated_url)
    yield SampleStore(engine, test_ratio=0.1)
    engine.dispose()


@pytest.fixture
def model_dir(tmp_path: Path) -> Path:
    path = tmp_path / "models"
    path.mkdir()
    return path


def training_settings(tmp_path: Path, db_url: str, **overrides: Any) -> TrainingSettings:
    values: dict[str, Any] = {
        "db_url": db_url,
        "model_dir": tmp_path / "models",
        "min_samples_for_retrain": 50,
        "n_estimators": 30,
        "retraining_interval_sec": 3600.0,  # tests trigger retrains themselves
        "early_retrains": False,
    }
    values.update(overrides)
    return TrainingSettings(**values)


MODEL_CHOICES = [
    (ModelType.XGBOOST, ObjectiveType.QUANTILE),
    (ModelType.XGBOOST, ObjectiveType.MEAN),
    (ModelType.LIGHTGBM, ObjectiveType.QUANTILE),
    (ModelType.LIGHTGBM, ObjectiveType.MEAN),
]


@pytest.fixture(params=MODEL_CHOICES, ids=lambda c: f"{c[0].value}-{c[1].value}")
def model_choice(request: pytest.FixtureRequest) -> tuple[ModelType, ObjectiveType]:
    choice: tuple[ModelType, ObjectiveType] = request.param
    return choice


__all__ = ["MODEL_CHOICES", "Target", "publish_trained_bundle", "training_settings"]
