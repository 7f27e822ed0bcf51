"""Alembic environment: URL from the caller's config or LATENCY_DB_URL; metadata from tables."""

from __future__ import annotations

from alembic import context

from shared.settings import TrainingSettings
from training_server.db import make_engine
from training_server.tables import metadata

config = context.config
url = config.get_main_option("sqlalchemy.url") or TrainingSettings().db_url
connection = config.attributes.get("connection")


def _run(conn: object) -> None:
    context.configure(connection=conn, target_metadata=metadata, render_as_batch=True)
    with context.begin_transaction():
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
