"""The model bundle: one directory per version, published atomically, verified on load.

    <model_dir>/versions/<version>/manifest.json   what the bundle is, sha256 of every file
    <model_dir>/versions/<version>/ttft.json ...   models in the library's native format
    <model_dir>/versions/<version>/ttft.joblib ... with LATENCY_LEGACY_ARTIFACTS=joblib only:
                                                  llm-d's pickles for its servers, never loaded here
    <model_dir>/CURRENT                           the published version's name

A bundle is written into a hidden temporary directory, fsynced, renamed into `versions/`,
and only then is CURRENT replaced (write temp + fsync + rename). A reader that follows
CURRENT therefore sees a complete TTFT+TPOT pair or the previous one, never a mix.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.backends import Backend, backend_for
from shared.features import FEATURES
from shared.settings import ModelType, ObjectiveType
from shared.target_space import TargetSpace
from shared.targets import TARGETS, Target

FORMAT_VERSION = 1
CURRENT_POINTER = "CURRENT"
VERSIONS_DIR = "versions"
MANIFEST = "manifest.json"


class BundleError(Exception):
    """A bundle that must not be served: missing, partial, corrupt or inconsistent."""


class NeedsNewerServer(BundleError):
    """A sound bundle this code cannot read: written in a format above FORMAT_VERSION, or
    naming features it does not know. A newer server reads it; this one keeps its own."""

    def __init__(self, version: str, bundle_format: int, why: str):
        super().__init__(f"{version}: {why}")
        self.version, self.bundle_format = version, bundle_format


class TargetManifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    file: str | None = Field(description="model file in the bundle; null = cold-start prior")
    sha256: str | None = None
    features: list[str]
    train_samples: int = 0
    test_samples: int = 0
    metrics: dict[str, float | None] = {}
    # How the model's output maps to ms (shared.target_space); bundles from before it: "ms".
    space: TargetSpace = TargetSpace.MS
    # Conformal correction: served predictions are model * exp(offset) (0 = none); a factor
    # beyond e^-3..e^3 would mean a broken model, and such a bundle is refused.
    calibration_log_offset: float = Field(0.0, ge=-3.0, le=3.0)


class Manifest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format_version: int = FORMAT_VERSION
    version: str
    created_at: datetime
    model_type: ModelType
    objective: ObjectiveType
    quantile: float
    targets: dict[Target, TargetManifest]
    library_versions: dict[str, str] = {}
    # Files for other servers to load (llm-d's ttft.joblib, tpot.joblib: training_server.
    # legacy.files), name -> sha256: verified on import, never loaded here. Written only when
    # present, so bundles without them read as before.
    legacy_files: dict[str, str] = {}

    def to_json(self) -> bytes:
        exclude = None if self.legacy_files else {"legacy_files"}
        return self.model_dump_json(indent=2, exclude=exclude).encode()


VERSION_FORMAT = "%Y%m%dT%H%M%S.%fZ"


def new_version(now: datetime | None = None) -> str:
    """Sortable, unique at a retrain cadence: 20261202T170512.123456Z."""
    return (now or datetime.now(UTC)).strftime(VERSION_FORMAT)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    with path.open("wb") as fh:
        fh.write(data)
        fh.flush()
        os.fsync(fh.fileno())


def replace_file(path: Path, data: bytes) -> None:
    """Replace `path` with `data` atomically: readers see the old or the new file whole."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    _write_durably(tmp, data)
    os.replace(tmp, path)
    _fsync_dir(path.parent)


def read_current_version(model_dir: Path) -> str | None:
    try:
        text = (model_dir / CURRENT_POINTER).read_text().strip()
    except FileNotFoundError:
        return None
    return text or None


def publish_pointer(model_dir: Path, version: str) -> None:
    """Point CURRENT at `version` atomically (temp file + fsync + rename)."""
    replace_file(model_dir / CURRENT_POINTER, version.encode() + b"\n")


def write_bundle(
    model_dir: Path,
    manifest: Manifest,
    models: dict[Target, Any | None],
    *,
    keep: int = 5,
    legacy_files: Mapping[str, bytes] | None = None,
) -> Path:
    """Save `models` with the manifest's backend (and `legacy_files`, name -> bytes, listed
    with their sha256), publish them as `manifest.version`."""
    backend = backend_for(manifest.model_type)
    versions = model_dir / VERSIONS_DIR
    versions.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".staging-{manifest.version}-", dir=versions))
    try:
        for target in TARGETS:
            entry = manifest.targets[target]
            model = models.get(target)
            if model is None:
                entry.file, entry.sha256 = None, None
                continue
            entry.file = f"{target.value}{backend.file_suffix}"
            path = staging / entry.file
            backend.save(model, path)
            with path.open("rb") as fh:
                os.fsync(fh.fileno())
            entry.sha256 = sha256_file(path)
        manifest.legacy_files = _write_legacy_files(staging, manifest, legacy_files or {})
        _write_durably(staging / MANIFEST, manifest.to_json())
        _fsync_dir(staging)
        final = versions / manifest.version
        os.rename(staging, final)
        _fsync_dir(versions)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    try:
        publish_pointer(model_dir, manifest.version)
    except BaseException:
        _drop_unpublished(model_dir, final, manifest.version)
        raise
    prune_versions(model_dir, keep=keep)
    return final


def _write_legacy_files(
    staging: Path, manifest: Manifest, files: Mapping[str, bytes]
) -> dict[str, str]:
    taken = {MANIFEST, *(e.file for e in manifest.targets.values() if e.file)}
    digests = {}
    for name, data in files.items():
        if name in taken or Path(name).name != name or name.startswith("."):
            raise BundleError(f"invalid legacy file name {name!r}")
        _write_durably(staging / name, data)
        digests[name] = hashlib.sha256(data).hexdigest()
    return digests


def verify_legacy_files(bundle_dir: Path, manifest: Manifest) -> None:
    """Check each listed legacy file against its sha256 (they are served, never loaded)."""
    for name, digest in manifest.legacy_files.items():
        path = bundle_dir / name
        if path.parent != bundle_dir or not path.is_file():
            raise BundleError(f"{manifest.version}: missing legacy file {name!r}")
        if sha256_file(path) != digest:
            raise BundleError(f"{manifest.version}: checksum mismatch for {name}")


def _drop_unpublished(model_dir: Path, folder: Path, version: str) -> None:
    """Remove a version folder whose pointer could not be written. Readers follow CURRENT
    only, so none can be reading it; kept, a pointer that fails at every retrain would add
    one bundle per interval (never pruned: pruning follows a publish) until the disk fills.
    When the pointer did move (only its directory fsync failed), or CURRENT cannot be read,
    the folder stays."""
    try:
        published = read_current_version(model_dir)
    except OSError:
        return
    if published != version:
        shutil.rmtree(folder, ignore_errors=True)


def prune_versions(model_dir: Path, *, keep: int) -> list[str]:
    """Delete all but the newest `keep` versions (never the published one)."""
    versions = model_dir / VERSIONS_DIR
    current = read_current_version(model_dir)
    names = sorted(p.name for p in versions.iterdir() if p.is_dir() and not p.name.startswith("."))
    doomed = [n for n in names[:-keep] if n != current] if keep else []
    for name in doomed:
        shutil.rmtree(versions / name, ignore_errors=True)
    return doomed


def read_manifest(bundle_dir: Path) -> Manifest:
    try:
        data = (bundle_dir / MANIFEST).read_bytes()
    except FileNotFoundError as exc:
        raise BundleError(f"{bundle_dir.name}: no {MANIFEST}") from exc
    except OSError as exc:  # a directory, an I/O error (ESTALE on NFS): unservable as well
        raise BundleError(f"{bundle_dir.name}: cannot read {MANIFEST}: {exc}") from exc
    _refuse_newer_format(bundle_dir.name, _raw_format(data))
    try:
        manifest = Manifest.model_validate_json(data)
    except ValidationError as exc:
        raise BundleError(f"{bundle_dir.name}: invalid manifest: {exc}") from exc
    _refuse_newer_format(bundle_dir.name, manifest.format_version)  # "2" validates as 2
    return manifest


def _raw_format(data: bytes) -> object:
    """The manifest's format_version before validation: a newer format may hold fields this
    code does not know (extra="forbid"), and its refusal must still say what it needs."""
    try:
        return json.loads(data).get("format_version")
    except (ValueError, AttributeError):
        return None  # not a JSON object: the validation says what is wrong


def _refuse_newer_format(version: str, found: object) -> None:
    if isinstance(found, int) and not isinstance(found, bool) and found > FORMAT_VERSION:
        raise NeedsNewerServer(
            version,
            found,
            f"needs a prediction server that reads bundle format {found}; "
            f"this one reads up to {FORMAT_VERSION}",
        )


def load_models(bundle_dir: Path, manifest: Manifest) -> dict[Target, Any | None]:
    """Verify every checksum and feature count, then load; raises BundleError."""
    backend: Backend = backend_for(manifest.model_type)
    models: dict[Target, Any | None] = {}
    for target in TARGETS:
        entry = manifest.targets.get(target)
        if entry is None:
            raise BundleError(f"{manifest.version}: manifest has no {target.value} entry")
        unknown = [name for name in entry.features if name not in FEATURES]
        if unknown:  # a newer trainer's feature (a model trained on it cannot run here)
            raise NeedsNewerServer(
                manifest.version,
                manifest.format_version,
                f"unknown {target.value} features {unknown}: needs a newer prediction "
                f"server that knows them (this one reads bundle format up to {FORMAT_VERSION})",
            )
        models[target] = (
            None
            if entry.file is None
            else _load_verified(bundle_dir, manifest.version, entry, backend)
        )
    return models


def _load_verified(bundle_dir: Path, version: str, entry: TargetManifest, backend: Backend) -> Any:
    """One model file: inside the bundle, its checksum as listed, loadable, and trained on
    the features the manifest lists; raises BundleError."""
    assert entry.file is not None
    path = bundle_dir / entry.file
    if path.parent != bundle_dir or not path.is_file():
        raise BundleError(f"{version}: missing model file {entry.file!r}")
    try:
        digest = sha256_file(path)
    except OSError as exc:
        raise BundleError(f"{version}: cannot read {entry.file}: {exc}") from exc
    if digest != entry.sha256:
        raise BundleError(f"{version}: checksum mismatch for {entry.file}")
    try:
        model = backend.load(path)
    except Exception as exc:  # the libraries raise their own error types on bad files
        raise BundleError(f"{version}: cannot load {entry.file}: {exc}") from exc
    if backend.num_features(model) != len(entry.features):
        raise BundleError(
            f"{version}: {entry.file} has {backend.num_features(model)} "
            f"features, manifest lists {len(entry.features)}"
        )
    names = backend.feature_names(model)
    if names is not None and names != entry.features:
        raise BundleError(
            f"{version}: {entry.file} was trained on features {names}, "
            f"manifest lists {entry.features}"
        )
    return model


def bundle_dir_for(model_dir: Path, version: str) -> Path:
    path = model_dir / VERSIONS_DIR / version
    if path.parent != model_dir / VERSIONS_DIR:
        raise BundleError(f"invalid version name {version!r}")
    return path
