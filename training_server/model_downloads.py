"""The files behind the model download routes: which file each model name of /models/list
and /model/{name}/info|download stands for, and what a cold start exports.

    ttft, tpot      the published bundle's native models (XGBoost JSON, LightGBM text); with
                    LATENCY_LEGACY_ARTIFACTS=joblib, llm-d's ttft.joblib / tpot.joblib instead
                    (an llm-d prediction server joblib-loads what these names download): the
                    bundle's, or the cold-start prior's while no bundle is published
    manifest        the bundle's manifest.json
    ttft_gated,     llm-d's queue-gated ensemble: always listed, never present here (one
    tpot_gated      model per target, with the queue as a feature)

The native files stay reachable, whatever the flag, at /model/{t}/xgb/json,
/model/{t}/lgb/txt and in /model/export.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from shared.artifact import MANIFEST, bundle_dir_for
from shared.predictor import LoadedBundle
from shared.settings import LegacyArtifacts, TrainingSettings
from shared.targets import TARGETS, Target
from shared.wire import rfc3339
from training_server.legacy.files import prior_dir
from training_server.legacy.regressors import FILE_NAMES

GATED_NAMES = ("ttft_gated", "tpot_gated")
MODEL_NAMES = ("ttft", "tpot", "manifest", *GATED_NAMES)


class UnknownModel(LookupError):
    """A model name that is none of MODEL_NAMES."""


def _folder(bundle: LoadedBundle | None, settings: TrainingSettings) -> Path | None:
    if bundle is None or bundle.manifest is None:
        return None
    return bundle_dir_for(settings.model_dir, bundle.version)


def native_file(
    bundle: LoadedBundle | None, settings: TrainingSettings, target: Target
) -> Path | None:
    folder = _folder(bundle, settings)
    if folder is None or bundle is None or bundle.manifest is None:
        return None
    entry = bundle.manifest.targets[target]
    return None if entry.file is None else folder / entry.file


def legacy_file(
    bundle: LoadedBundle | None, settings: TrainingSettings, target: Target
) -> Path | None:
    """llm-d's file of `target`: the bundle's, or the prior's before any bundle."""
    name = FILE_NAMES[target]
    folder = _folder(bundle, settings)
    if folder is None:
        return prior_dir(settings.model_dir) / name
    assert bundle is not None and bundle.manifest is not None  # _folder says so
    return folder / name if name in bundle.manifest.legacy_files else None


def model_file(bundle: LoadedBundle | None, settings: TrainingSettings, name: str) -> Path | None:
    """The file `name` stands for now (None: nothing); UnknownModel for a name not listed."""
    if name not in MODEL_NAMES:
        raise UnknownModel(name)
    if name in GATED_NAMES:
        return None
    if name == "manifest":
        folder = _folder(bundle, settings)
        return None if folder is None else folder / MANIFEST
    if settings.legacy_artifacts is LegacyArtifacts.JOBLIB:
        return legacy_file(bundle, settings, Target(name))
    return native_file(bundle, settings, Target(name))


def file_info(path: Path | None) -> dict[str, Any]:
    """exists, size_bytes and last_modified (RFC 3339) of `path`, as llm-d lists files."""
    try:
        stat = path.stat() if path is not None and path.is_file() else None
    except FileNotFoundError:  # pruned between the two looks
        stat = None
    return {
        "exists": stat is not None,
        "size_bytes": stat.st_size if stat else 0,
        "last_modified": rfc3339(datetime.fromtimestamp(stat.st_mtime, UTC)) if stat else None,
    }


def cold_start_files(settings: TrainingSettings) -> list[Path]:
    """What a cold start exports beside its metadata: the prior's legacy files, when on."""
    if settings.legacy_artifacts is LegacyArtifacts.NONE:
        return []
    paths = [legacy_file(None, settings, t) for t in TARGETS]
    return [p for p in paths if p is not None and p.is_file()]
