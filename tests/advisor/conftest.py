"""Stores filled once per module through a real trainer: SQLite files and PostgreSQL
schemas, a small one (too little traffic) and an adequate one (1,200+ rows over 12 min)."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from devkit.stores import fill_through_trainer
from tests.advisor.stores import MIXED, simulated_rows
from tests.conftest import PG_URL, SKIP_PG


@dataclass(frozen=True)
class Stores:
    small: str  # 300 rows over 5 minutes
    adequate: str  # 1,200+ rows over 12 minutes
    file: Path | None  # the adequate SQLite file


def _fill_both(small: str, adequate: str, folder: Path) -> None:
    fill_through_trainer(small, simulated_rows(150, 5.0), folder / "small")
    fill_through_trainer(adequate, simulated_rows(640, 12.0), folder / "adequate")


@pytest.fixture(scope="module")
def sqlite_stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    folder = tmp_path_factory.mktemp("advise-sqlite")
    small, adequate = folder / "small.db", folder / "adequate.db"
    _fill_both(f"sqlite:///{small}", f"sqlite:///{adequate}", folder)
    return Stores(f"sqlite:///{small}", f"sqlite:///{adequate}", adequate)


@pytest.fixture(scope="module")
def mixed_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1,200+ rows over 12 minutes from 2 h200 and 2 b200 pods under token-load, each row
    naming its pod's class (pod_class), stored through a real trainer."""
    folder = tmp_path_factory.mktemp("advise-mixed")
    url = f"sqlite:///{folder / 'mixed.db'}"
    fill_through_trainer(
        url, simulated_rows(640, 12.0, hardware=MIXED, policy="token-load"), folder
    )
    return url


PD_ROLES = ("prefill", "decode", "decode", "decode")  # the P/D pool the role tests' rows come from


@pytest.fixture(scope="module")
def pd_store(tmp_path_factory: pytest.TempPathFactory) -> str:
    """1,200+ rows over 12 minutes from a P/D pool of 1 prefill and 3 decode pods under
    pd-heuristic, each row naming its pod's role (pod_type), stored through a real trainer."""
    folder = tmp_path_factory.mktemp("advise-pd")
    url = f"sqlite:///{folder / 'pd.db'}"
    rows = simulated_rows(640, 12.0, policy="pd-heuristic", roles=PD_ROLES)
    fill_through_trainer(url, rows, folder)
    return url


@pytest.fixture(scope="module")
def postgres_stores(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stores]:
    if SKIP_PG:
        pytest.skip("LATENCY_TEST_SKIP_POSTGRES=1")
    schemas = [f"adv_{uuid.uuid4().hex[:10]}" for _ in range(2)]
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        for schema in schemas:
            conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    urls = [f"{PG_URL}?options=-csearch_path%3D{schema}" for schema in schemas]
    try:
        _fill_both(urls[0], urls[1], tmp_path_factory.mktemp("advise-postgres"))
        yield Stores(urls[0], urls[1], None)
    finally:
        with admin.begin() as conn:
            for schema in schemas:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


@pytest.fixture
def empty_schema_url() -> Iterator[str]:
    """A PostgreSQL schema nobody migrated."""
    if SKIP_PG:
        pytest.skip("LATENCY_TEST_SKIP_POSTGRES=1")
    schema = f"adv_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield f"{PG_URL}?options=-csearch_path%3D{schema}"
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()
