"""Alembic revisions for the training store (shipped as a package so installs carry them)."""
