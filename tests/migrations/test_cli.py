"""`latency-predictor migrate`: operators who turn start-up migrations off run them explicitly."""

from __future__ import annotations

import os
import subprocess
import sys

from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, inspect

from training_server.migrate import alembic_config


def test_migrate_command_brings_the_store_to_head(db_url: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "shared.cli", "migrate"],
        env={**os.environ, "LATENCY_DB_URL": db_url}, capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "newest revision" in done.stdout
    engine = create_engine(db_url)
    try:
        tables = set(inspect(engine).get_table_names())
        with engine.connect() as conn:
            head = conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar_one()
    finally:
        engine.dispose()
    assert {"samples", "retrains", "alembic_version"} <= tables
    assert head == ScriptDirectory.from_config(alembic_config(db_url)).get_current_head()
