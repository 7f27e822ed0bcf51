"""Alembic environment: URL from the caller's config or LATENCY_DB_URL; metadata from tables."""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection, text

from shared.settings import TrainingSettings
from training_server.db import make_engine
from training_server.tables import metadata

config = context.config
url = config.get_main_option("sqlalchemy.url") or TrainingSettings().db_url
connection = config.attributes.get("connection")


# Several training replicas may start at once; on PostgreSQL they queue on this lock, so
# exactly one migrates and the others then find the schema at head. The key is per schema,
# so deployments (or test runs) sharing one database never wait on each other.
MIGRATION_LOCK = text(
    "SELECT pg_advisory_xact_lock(hashtext('latency-predictor-migrations:' || current_schema()))"
)


def _run(conn: Connection) -> None:
    context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
        if conn.dialect.name == "postgresql":
            conn.execute(MIGRATION_LOCK)
        context.run_migrations()


if context.is_offline_mode():
    context.configure(url=url, target_metadata=metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
elif connection is not None:
    _run(connection)
else:
    engine = make_engine(url)
    with engine.connect() as conn:
        _run(conn)
    engine.dispose()
