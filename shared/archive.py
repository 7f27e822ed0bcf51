"""Bundle archives (tar.gz): export a published version, import one to seed a cold start.

An import is verified exactly like a bundle the trainer wrote (manifest, sha256 of every
file, feature counts) before it is renamed into place and published; a file its manifest
does not list is refused. A trainer with no bundle yet exports its cold-start state: a
`metadata.json` naming the documented prior (plus llm-d's legacy files of the prior when
those are on), which holds no model to import and is refused as such.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import tarfile
import tempfile
import zlib
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.artifact import (
    MANIFEST,
    VERSIONS_DIR,
    BundleError,
    Manifest,
    bundle_dir_for,
    load_models,
    prune_versions,
    publish_pointer,
    read_manifest,
    verify_legacy_files,
)
from shared.predictor import LoadedBundle, bundle_of
from shared.targets import Target

METADATA = "metadata.json"
# gzip level 1, not tarfile's 9: a trainer packs every bundle it publishes for the replicas
# that share it through the store, and again for every mirror's /model/export. On a bundle
# of two 100-tree models (328 KB of JSON) level 9 took 25 ms of CPU and made 64 KB, level 1
# 3.5 ms and 87 KB (benchmarks/bench_bundle_cost.py): CPU is what many pools run short of,
# not bytes on a cluster network.
COMPRESS_LEVEL = 1


def pack_bundle(
    bundle_dir: Path, metadata: dict[str, Any], *, level: int = COMPRESS_LEVEL
) -> bytes:
    return pack_files(sorted(bundle_dir.iterdir()), metadata, level=level)


def pack_files(
    paths: Sequence[Path], metadata: dict[str, Any], *, level: int = COMPRESS_LEVEL
) -> bytes:
    """A tar.gz of `paths` (by file name, with their own mtimes) and metadata.json, at
    gzip `level`."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz", compresslevel=level) as tar:
        for path in paths:
            tar.add(path, arcname=path.name, recursive=False)
        data = json.dumps(metadata, indent=2, default=str).encode()
        info = tarfile.TarInfo(METADATA)
        info.size, info.mtime = len(data), int(datetime.now(UTC).timestamp())
        tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def archive_version(archive: bytes) -> str | None:
    """The version an archive's manifest names, read without unpacking the rest; None when
    it has no readable manifest (import_bundle then says why it refuses it)."""
    try:
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
            member = tar.getmember(MANIFEST)
            source = tar.extractfile(member)
            data = source.read() if source is not None else b""
        version = json.loads(data).get("version")
    except (tarfile.TarError, KeyError, OSError, EOFError, zlib.error, ValueError, AttributeError):
        return None
    return version if isinstance(version, str) else None


def import_bundle(model_dir: Path, archive: bytes, *, keep: int = 5) -> str:
    """Verify and publish the bundle in `archive`; returns its version. Raises BundleError."""
    return _import(model_dir, archive, keep)[0].version


def import_loaded(model_dir: Path, archive: bytes, *, keep: int = 5) -> LoadedBundle:
    """import_bundle, returning the bundle ready to serve: built from the models its
    verification loaded, not read and parsed a second time (a follower or a mirror imports
    every bundle its pools publish). Raises BundleError."""
    manifest, models = _import(model_dir, archive, keep)
    return bundle_of(manifest, models)


def _import(model_dir: Path, archive: bytes, keep: int) -> tuple[Manifest, dict[Target, Any]]:
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
        metadata = staging / METADATA
        cold_start = metadata.is_file() and _is_cold_start(metadata)
        metadata.unlink(missing_ok=True)
        if not (staging / MANIFEST).is_file():
            if cold_start:
                raise BundleError(
                    "a cold-start export holds no trained model to import (a "
                    "server with no model already serves the documented prior)"
                )
            raise BundleError(f"archive has no {MANIFEST}")
        manifest = read_manifest(staging)
        _refuse_unlisted(staging, manifest)
        models = load_models(staging, manifest)
        verify_legacy_files(staging, manifest)
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
    return manifest, models


def _is_cold_start(metadata: Path) -> bool:
    try:
        return json.loads(metadata.read_bytes()).get("cold_start") is True
    except (ValueError, AttributeError):
        return False


def _refuse_unlisted(staging: Path, manifest: Manifest) -> None:
    """Nothing but what the manifest lists (and checksums) enters a bundle directory."""
    listed = {
        MANIFEST,
        *manifest.legacy_files,
        *(e.file for e in manifest.targets.values() if e.file),
    }
    extra = sorted(p.name for p in staging.iterdir() if p.name not in listed)
    if extra:
        raise BundleError(f"{manifest.version}: files its manifest does not list: {extra}")
