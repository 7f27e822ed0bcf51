"""Fixtures the migration tests share."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine

from training_server.db import make_engine


@pytest.fixture
def engine(db_url: str) -> Iterator[Engine]:
    """Connects with the URL itself, so PostgreSQL inspects the test schema (search_path)."""
    engine = make_engine(db_url)
    yield engine
    engine.dispose()
