"""Run Alembic migrations from code (start-up and the `migrate` CLI command)."""

from __future__ import annotations

from importlib.util import find_spec
from pathlib import Path

from alembic import command
from alembic.config import Config


def scripts_folder() -> Path:
    """Where the `migrations` package (Alembic's env.py and versions) is installed. Found,
    not imported: its env.py imports this package's tables, so it sits above us."""
    spec = find_spec("migrations")
    if spec is None or spec.origin is None:
        raise RuntimeError("the migrations package is not installed beside training_server")
    return Path(spec.origin).parent


def alembic_config(url: str) -> Config:
    config = Config()
    config.set_main_option("script_location", str(scripts_folder()))
    # ConfigParser treats % as interpolation; URLs may carry escaped characters.
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def upgrade(url: str, revision: str = "head") -> None:
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)
