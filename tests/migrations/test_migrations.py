"""Alembic migrations on a real SQLite file and a real PostgreSQL schema (db_url fixture)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Column, Engine, Integer, MetaData, inspect, select, text

from devkit.synthetic import synthetic_rows
from shared.schemas import TrainingEntry
from shared.targets import Target
from training_server.migrate import alembic_config, downgrade, upgrade
from training_server.retrain_record import Outcome, RetrainRecord, TargetRecord
from training_server.store import SampleStore
from training_server.tables import metadata

APP_TABLES = {"samples", "retrains", "training_replicas", "pool_leases", "pool_bundles"}


def tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def revision(engine: Engine) -> str | None:
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head(db_url: str) -> str:
    current = ScriptDirectory.from_config(alembic_config(db_url)).get_current_head()
    assert current is not None
    return current


def test_a_single_linear_head(db_url: str) -> None:
    script = ScriptDirectory.from_config(alembic_config(db_url))
    assert len(script.get_heads()) == 1
    assert script.get_base() == "0001"


def test_upgrade_from_empty_creates_the_tables(db_url: str, engine: Engine) -> None:
    assert tables(engine) == set()
    upgrade(db_url)
    assert tables(engine) == APP_TABLES | {"alembic_version"}
    assert revision(engine) == head(db_url)
    indexes = {i["name"] for i in inspect(engine).get_indexes("samples")}
    assert "ix_samples_split_bucket" in indexes
    upgrade(db_url)  # already at head: a no-op
    assert revision(engine) == head(db_url)


def test_downgrade_to_base_and_upgrade_again(db_url: str, engine: Engine) -> None:
    upgrade(db_url)
    downgrade(db_url, "base")
    assert tables(engine) & APP_TABLES == set()
    assert revision(engine) is None
    upgrade(db_url)
    assert tables(engine) >= APP_TABLES
    assert revision(engine) == head(db_url)


def test_migrated_schema_serves_the_store(db_url: str, engine: Engine) -> None:
    upgrade(db_url)
    store = SampleStore(engine, test_ratio=0.0)
    store.add_samples([TrainingEntry.model_validate(r) for r in synthetic_rows(3)])
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM samples")).scalar_one() == 3
        kinds = conn.execute(select(metadata.tables["samples"].c.measures)).scalars().all()
    assert sorted(kinds) == sorted(1 if r["actual_ttft_ms"] > 0 else 2 for r in synthetic_rows(3))


def diff(engine: Engine, target: MetaData) -> list[Any]:
    """Alembic's diffs, typed Any by alembic: a tuple per added or removed object, a list of
    tuples per modified column."""
    with engine.connect() as conn:
        changes: list[Any] = compare_metadata(MigrationContext.configure(conn), target)
        return changes


def test_migrations_match_the_table_definitions(db_url: str, engine: Engine) -> None:
    """A change to training_server/tables.py without a new revision fails here."""
    upgrade(db_url)
    assert diff(engine, metadata) == []


def test_the_schema_comparison_notices_a_model_change(db_url: str, engine: Engine) -> None:
    upgrade(db_url)
    changed = MetaData()
    for table in metadata.tables.values():
        table.to_metadata(changed)
    changed.tables["samples"].append_column(Column("new_feature", Integer, nullable=True))
    changes = diff(engine, changed)
    assert len(changes) == 1
    op, _schema, table, column = changes[0]
    assert (op, table, column.name) == ("add_column", "samples", "new_feature")


def test_0004_keeps_older_retrains_and_records_the_model_choice(
    db_url: str, engine: Engine
) -> None:
    """The model choice columns: a store at 0003 with a retrain row upgrades in place; the
    old row reads back without a choice, a new one with the candidate each target served and
    every candidate's loss (JSON); downgrading to 0003 drops exactly those columns."""
    upgrade(db_url, "0003")
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO retrains (started_at, duration_s, status, model_type, objective, "
                "quantile, max_sample_id) VALUES ('2026-12-03 10:00:00', 0.1, 'ok', 'xgboost', "
                "'quantile', 0.9, 7)"
            )
        )
    upgrade(db_url)
    store = SampleStore(engine, test_ratio=0.0)
    store.record_retrain(
        RetrainRecord(
            started_at=datetime(2026, 12, 3, 11, tzinfo=UTC),
            duration_s=0.2,
            status=Outcome.OK,
            model_type="xgboost",
            objective="quantile",
            quantile=0.9,
            max_sample_id=9,
            targets={
                Target.TTFT: TargetRecord(model_choice="trees_100x4_sharp"),
                Target.TPOT: TargetRecord(model_choice="p90"),
            },
            model_candidates={
                "ttft": {"p90": 12.5, "trees_100x4_sharp": 3.25},
                "tpot": {"p90": 0.5},
            },
        )
    )
    new, old = store.list_retrains()
    old_choice = old.targets[Target.TTFT].model_choice
    assert (old.max_sample_id, old_choice, old.model_candidates) == (7, None, None)
    new_choices = (new.targets[Target.TTFT].model_choice, new.targets[Target.TPOT].model_choice)
    assert new_choices == ("trees_100x4_sharp", "p90")
    assert new.model_candidates is not None
    assert new.model_candidates["ttft"] == {"p90": 12.5, "trees_100x4_sharp": 3.25}
    downgrade(db_url, "0003")
    columns = {c["name"] for c in inspect(engine).get_columns("retrains")}
    assert not columns & {"ttft_model_choice", "tpot_model_choice", "model_candidates"}
    assert "window_limit" in columns
