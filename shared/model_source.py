"""Where a prediction server's bundles come from: the trainer publishing into its model
directory (a shared volume), or mirrored from the trainer over HTTP (llm-d's chart gives
each prediction container a volume of its own). Decided at start-up, from
LATENCY_SYNC_FROM_TRAINER when set, else from TRAINING_SERVER_URL and the directory."""

from __future__ import annotations

import os
from enum import StrEnum
from pathlib import Path

CURRENT_FILE = "CURRENT"  # shared.artifact.CURRENT_POINTER (artifact imports settings)
# Written into its model directory by a prediction server that mirrors the trainer's
# bundles, so that after a restart it knows the CURRENT there is its own copy, not the
# trainer's publication, and goes on mirroring.
MIRROR_MARKER = "MIRRORED_FROM"


class ModelSource(StrEnum):
    SHARED_DIR = "shared-dir"  # the trainer publishes into our model directory
    TRAINER_SYNC = "trainer-sync"  # we mirror them from TRAINING_SERVER_URL over HTTP


def model_source_for(
    model_dir: Path, training_server_url: str | None, sync_from_trainer: bool | None
) -> tuple[ModelSource, str]:
    """Where a prediction server gets its bundles, and why. `sync_from_trainer` is
    LATENCY_SYNC_FROM_TRAINER when set (it decides); unset, a server that knows the trainer
    mirrors from it unless the trainer publishes into its model directory."""
    if sync_from_trainer is not None:
        if not sync_from_trainer:
            return ModelSource.SHARED_DIR, "LATENCY_SYNC_FROM_TRAINER=false"
        if training_server_url:
            return ModelSource.TRAINER_SYNC, "LATENCY_SYNC_FROM_TRAINER=true"
        return ModelSource.SHARED_DIR, "LATENCY_SYNC_FROM_TRAINER=true but no TRAINING_SERVER_URL"
    if not training_server_url:
        return ModelSource.SHARED_DIR, "no TRAINING_SERVER_URL"
    return _source_from_directory(model_dir, training_server_url)


def _source_from_directory(model_dir: Path, url: str) -> tuple[ModelSource, str]:
    if (model_dir / MIRROR_MARKER).is_file():
        return ModelSource.TRAINER_SYNC, f"{model_dir} holds bundles mirrored from the trainer"
    if (model_dir / CURRENT_FILE).is_file():
        return ModelSource.SHARED_DIR, f"{model_dir} holds a CURRENT the trainer published"
    if not _writable(model_dir):
        return ModelSource.SHARED_DIR, f"{model_dir} is read-only here: the trainer's to publish"
    return (
        ModelSource.TRAINER_SYNC,
        f"no trainer-published CURRENT in {model_dir}, TRAINING_SERVER_URL={url}",
    )


def _writable(path: Path) -> bool:
    """Whether this process may write `path`, or create it in its nearest existing parent."""
    for candidate in (path, *path.absolute().parents):
        if candidate.exists():
            return os.access(candidate, os.W_OK)
    return False
