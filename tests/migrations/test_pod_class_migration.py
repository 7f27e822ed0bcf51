"""Migration 0005 (`samples.pod_class`) on a real SQLite file and a real PostgreSQL schema:
rows stored before it read back with no class, new rows keep theirs, and a downgrade drops
exactly the column (SQLite's copy of the table keeps AUTOINCREMENT and the indexes)."""

from __future__ import annotations

import numpy as np
from sqlalchemy import Engine, inspect, select, text

from devkit.synthetic import synthetic_rows
from shared.features import pod_class_code
from shared.schemas import TrainingEntry
from shared.targets import Target
from training_server.migrate import downgrade, upgrade
from training_server.store import SampleStore
from training_server.tables import samples

# The samples columns at 0004, all NOT NULL but the predictions: what a store held before.
OLD_ROW = (
    "INSERT INTO samples (received_at, timestamp, kv_cache_percentage, input_token_length, "
    "num_request_waiting, num_request_running, num_tokens_generated, prefix_cache_score, "
    "pod_type, prefill_tokens_in_flight, decode_tokens_in_flight, encoder_matched_size, "
    "encoder_input_size, actual_ttft_ms, actual_tpot_ms, measures, is_test, bucket) VALUES "
    "('2026-12-04 10:00:00', '2026-12-04 10:00:00', 0.5, 100, 0, 1, 1, 0.0, '', 0, 0, 0, 0, "
    "42.0, 0.0, 1, :is_test, 20)"
)


def columns(engine: Engine) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns("samples")}


def indexes(engine: Engine) -> set[str]:
    return {str(i["name"]) for i in inspect(engine).get_indexes("samples")}


def test_0005_adds_the_class_keeps_old_rows_and_downgrades(db_url: str, engine: Engine) -> None:
    upgrade(db_url, "0004")
    assert "pod_class" not in columns(engine)
    with engine.begin() as conn:
        conn.execute(text(OLD_ROW), {"is_test": False})
    before_indexes = indexes(engine)

    upgrade(db_url)
    assert "pod_class" in columns(engine)
    store = SampleStore(engine, test_ratio=0.0)
    rows = synthetic_rows(3, seed=1)
    for row, pod_class in zip(rows, ("b200", "h200", None), strict=True):
        row["pod_class"] = pod_class
        row["actual_ttft_ms"], row["actual_tpot_ms"] = 20.0, 0.0
    store.add_samples([TrainingEntry.model_validate(r) for r in rows])
    with engine.connect() as conn:
        stored = conn.execute(select(samples.c.pod_class).order_by(samples.c.id)).scalars().all()
    assert stored == ["", "b200", "h200", ""]  # the old row reads back with no class
    window, y = store.window(Target.TTFT, test=False)
    np.testing.assert_array_equal(y, [42.0, 20.0, 20.0, 20.0])
    assert window["pod_class"].tolist() == stored
    np.testing.assert_array_equal(window["pod_class_code"], [pod_class_code(c) for c in stored])

    downgrade(db_url, "0004")
    assert "pod_class" not in columns(engine)
    assert indexes(engine) == before_indexes
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM samples")).scalar_one() == 4
        if engine.dialect.name == "sqlite":  # ids are never reused: "max id" marks new rows
            ddl = conn.execute(
                text("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'samples'")
            ).scalar_one()
            assert "AUTOINCREMENT" in ddl.upper()
    with engine.begin() as conn:  # a store at 0004 takes rows again
        conn.execute(text(OLD_ROW), {"is_test": True})
        ids = conn.execute(text("SELECT id FROM samples ORDER BY id")).scalars().all()
    assert ids == [1, 2, 3, 4, 5]

    upgrade(db_url)  # and back: the classes were dropped with the column
    with engine.connect() as conn:
        again = conn.execute(select(samples.c.pod_class)).scalars().all()
    assert again == [""] * 5
