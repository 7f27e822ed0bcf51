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

from shared.archive import import_bundle
from shared.artifact import read_current_version, replace_file
from shared.model_source import MIRROR_MARKER

LOCK_FILE = ".mirror.lock"


@contextmanager
def _locked(model_dir: Path) -> Iterator[None]:
    model_dir.mkdir(parents=True, exist_ok=True)
    with (model_dir / LOCK_FILE).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes
        yield


def import_mirrored(model_dir: Path, archive: bytes, version: str, source: str) -> bool:
    """Publish `archive` (the trainer's `version`) locally unless another worker already
    did; True when this call published it. Raises BundleError for a bundle that fails
    verification. `source`: the trainer's URL, kept in the marker for whoever looks."""
    with _locked(model_dir):
        if read_current_version(model_dir) == version:
            return False
        if not (model_dir / MIRROR_MARKER).is_file():
            replace_file(model_dir / MIRROR_MARKER, f"{source}\n".encode())
        import_bundle(model_dir, archive)
        return True
