"""Migration 0006 (`samples.pool`, `retrains.pool`) on a real SQLite file and a real
PostgreSQL schema: rows and retrains stored before it belong to the pool `default`, the
window indexes lead with the pool, and a downgrade restores the 0005 indexes."""

from __future__ import annotations

from sqlalchemy import Engine, inspect, text

from devkit.synthetic import synthetic_rows
from shared.schemas import TrainingEntry
from shared.targets import Target
from tests.migrations.test_pod_class_migration import OLD_ROW
from training_server.migrate import downgrade, upgrade
from training_server.store import SampleStore

OLD_RETRAIN = (
    "INSERT INTO retrains (started_at, duration_s, status, model_type, objective, quantile, "
    "max_sample_id) VALUES ('2026-12-04 10:00:00', 1.0, 'ok', 'xgboost', 'quantile', 0.9, 1)"
)


def index_columns(engine: Engine) -> dict[str, list[str]]:
    return {
        str(i["name"]): [str(c) for c in i["column_names"]]
        for i in inspect(engine).get_indexes("samples")
    }


def test_0006_puts_old_rows_in_the_default_pool_and_downgrades(db_url: str, engine: Engine) -> None:
    upgrade(db_url, "0005")
    with engine.begin() as conn:
        conn.execute(text(OLD_ROW), {"is_test": False})
        conn.execute(text(OLD_RETRAIN))
    old_indexes = index_columns(engine)
    assert old_indexes["ix_samples_window"] == ["is_test", "measures", "id"]

    upgrade(db_url)
    indexes = index_columns(engine)
    assert indexes["ix_samples_window"] == ["pool", "is_test", "measures", "id"]
    assert indexes["ix_samples_pool_id"] == ["pool", "id"]
    default = SampleStore(engine, test_ratio=0.0)
    h200 = default.for_pool("h200")
    h200.add_samples([TrainingEntry.model_validate(r) for r in synthetic_rows(4, seed=1)])
    assert default.counts().training.total == 1  # the row from before
    assert [r.pool for r in default.list_retrains()] == ["default"]
    assert (
        h200.list_retrains() == []
        and h200.counts().as_json()["training_data"]["total_samples"] == 4
    )
    assert default.stored_pools() == ["default", "h200"]
    _, y = default.window(Target.TTFT, test=False)
    assert y.tolist() == [42.0]

    downgrade(db_url, "0005")
    assert index_columns(engine) == old_indexes
    with engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM samples")).scalar_one() == 5
