"""Writing a bundle mirrored from the trainer into the local model directory.

A prediction server's workers share that directory and poll on the same interval, so they
ask for a new version at about the same moment: an exclusive lock on a file in the
directory lets one import it while the others wait and then find it published. Before the
first import the directory is marked as a mirror (settings.MIRROR_MARKER), so that a
restarted server knows its CURRENT is its own copy and goes on mirroring.
"""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from shared.archive import archive_version, import_loaded
from shared.artifact import read_current_version, replace_file
from shared.model_source import MIRROR_MARKER
from shared.predictor import LoadedBundle

LOCK_FILE = ".mirror.lock"


@contextmanager
def _locked(model_dir: Path) -> Iterator[None]:
    model_dir.mkdir(parents=True, exist_ok=True)
    with (model_dir / LOCK_FILE).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def goes_back(version: str | None, local: str | None) -> bool:
    """`version` sorts before the one mirrored here. Behind a Service of several training
    replicas, one that has not caught up with a pool's newest bundle (a second, with the
    bundles shared through the store) answers the one before: a mirror must not return to
    it. Versions are publication times, and a retrain always publishes one that sorts
    after the last (training_server.retrain.publish), so only an import of an older bundle
    on the trainer goes back, and mirrors follow the next retrain instead."""
    return version is not None and local is not None and version < local


def import_mirrored(
    model_dir: Path, archive: bytes, version: str, source: str
) -> LoadedBundle | None:
    """Publish `archive` (the trainer's `version`) locally unless another worker already
    did, or it is older than the bundle mirrored here (goes_back); the bundle, ready to
    serve, when this call published it (else None). Raises BundleError for a bundle that
    fails verification. `source`: the trainer's URL, kept in the marker for whoever looks."""
    with _locked(model_dir):
        local = read_current_version(model_dir)
        if local == version or goes_back(archive_version(archive) or version, local):
            return None
        if not (model_dir / MIRROR_MARKER).is_file():
            replace_file(model_dir / MIRROR_MARKER, f"{source}\n".encode())
        return import_loaded(model_dir, archive)
