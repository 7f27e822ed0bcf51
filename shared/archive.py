"""Bundle archives (tar.gz): export a published version, import one to seed a cold start.

An import is verified exactly like a bundle the trainer wrote (manifest, sha256 of every
file, feature counts) before it is renamed into place and published.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.artifact import (
    MANIFEST,
    VERSIONS_DIR,
    BundleError,
    bundle_dir_for,
    load_models,
    prune_versions,
    publish_pointer,
    read_manifest,
)

METADATA = "metadata.json"


def pack_bundle(bundle_dir: Path, metadata: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(bundle_dir.iterdir()):
            tar.add(path, arcname=path.name, recursive=False)
        data = json.dumps(metadata, indent=2, default=str).encode()
        info = tarfile.TarInfo(METADATA)
        info.size, info.mtime = len(data), int(datetime.now(UTC).timestamp())
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def import_bundle(model_dir: Path, archive: bytes, *, keep: int = 5) -> str:
    """Verify and publish the bundle in `archive`; returns its version. Raises BundleError."""
    versions = model_dir / VERSIONS_DIR
    versions.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".import-", dir=versions))
    try:
        try:
            with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
                members = tar.getmembers()
                if any(not m.isfile() or "/" in m.name or m.name.startswith(".") for m in members):
                    raise BundleError("archive may hold only plain files at its top level")
                for member in members:  # plain files named without a path (checked above)
                    # Read and written by hand: no owner, mode or time from the archive, and
                    # no need for extractall's `filter` (Python >= 3.11.4; Debian 12 has 3.11.2).
                    source = tar.extractfile(member)
                    if source is None:
                        raise BundleError(f"{member.name} is not a regular file")
                    (staging / member.name).write_bytes(source.read())
        except (tarfile.TarError, OSError, EOFError, zlib.error) as exc:
            raise BundleError(f"not a readable tar.gz bundle: {exc}") from exc
        (staging / METADATA).unlink(missing_ok=True)
        if not (staging / MANIFEST).is_file():
            raise BundleError(f"archive has no {MANIFEST}")
        manifest = read_manifest(staging)
        load_models(staging, manifest)
        final = bundle_dir_for(model_dir, manifest.version)
        if final.exists():
            shutil.rmtree(staging)
        else:
            for path in staging.iterdir():
                with path.open("rb") as fh:
                    os.fsync(fh.fileno())
            os.rename(staging, final)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    publish_pointer(model_dir, manifest.version)
    prune_versions(model_dir, keep=keep)
    return manifest.version
