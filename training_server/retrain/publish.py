"""A retrain's bundle: its manifest (bundle_manifest), written and read back as the servers
read it (write_and_load); and the newest one another replica published (PublishedFollower).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from shared.artifact import (
    VERSION_FORMAT,
    BundleError,
    Manifest,
    TargetManifest,
    new_version,
    read_current_version,
    write_bundle,
)
from shared.backends import library_versions
from shared.features import Columns
from shared.predictor import LoadedBundle, load_bundle
from shared.settings import TrainingSettings
from shared.targets import Target
from training_server.legacy.files import for_bundle
from training_server.retrain.fit import TargetFit

log = logging.getLogger(__name__)


def bundle_manifest(
    settings: TrainingSettings, started: datetime, fits: Mapping[Target, TargetFit]
) -> Manifest:
    """The manifest of the bundle of `fits`, a retrain started at `started`."""
    s = settings
    return Manifest(
        version=version_after(new_version(started), _published_version(s.model_dir)),
        created_at=started,
        model_type=s.model_type,
        objective=s.objective_type,
        quantile=s.quantile_alpha,
        targets={
            t: TargetManifest(
                file=None,
                features=list(f.features),
                train_samples=f.train_samples,
                test_samples=f.test_samples,
                metrics=f.metrics,
                space=f.space,
                calibration_log_offset=f.log_offset,
            )
            for t, f in fits.items()
        },
        library_versions=library_versions(),
    )


def version_after(version: str, published: str | None) -> str:
    """`version`, or a microsecond after `published` when it would not sort after it: the
    pool's previous bundle may come from another training replica (pool_leases), whose
    clock may run ahead of this one's, and a version never goes back."""
    if published is None or version > published:
        return version
    try:
        previous = datetime.strptime(published, VERSION_FORMAT).replace(tzinfo=UTC)
    except ValueError:  # not a version this service wrote (an import): nothing to follow
        return version
    return new_version(previous + timedelta(microseconds=1))


def _published_version(model_dir: Path) -> str | None:
    try:
        return read_current_version(model_dir)
    except OSError:
        return None


def write_and_load(
    settings: TrainingSettings,
    manifest: Manifest,
    fits: Mapping[Target, TargetFit],
    windows: Mapping[Target, tuple[Columns, np.ndarray]],
) -> LoadedBundle:
    """Publish the bundle (CURRENT names it once this returns), with llm-d's legacy files
    when they are on (fitted on `windows`, each target's training rows), and read it back
    as the servers will read it (BundleError when it does not verify)."""
    s = settings
    write_bundle(
        s.model_dir,
        manifest,
        {t: f.model for t, f in fits.items()},
        keep=s.keep_model_versions,
        # The rows of each target that has a model; None: the prior's file.
        legacy_files=for_bundle(
            s, {t: None if f.model is None else windows[t] for t, f in fits.items()}
        ),
    )
    return load_bundle(s.model_dir, manifest.version)


class PublishedFollower:
    """Loads the bundle CURRENT names when it moved (another replica published it); a
    version that failed to load is refused (and logged) once, not retried."""

    def __init__(self, model_dir: Path):
        self.model_dir = model_dir
        self.refused: str | None = None

    def newer(self, served: LoadedBundle | None) -> LoadedBundle | None:
        """The published bundle when it is not `served` (None: nothing new to serve)."""
        try:
            version = read_current_version(self.model_dir)
        except OSError:
            log.exception("cannot read the published version")
            return None
        if version is None or version in (served and served.version, self.refused):
            return None
        try:
            return load_bundle(self.model_dir, version)
        except BundleError:
            # Pruned between the read and the load, or broken: the leader's next one follows.
            log.warning("published bundle %s not loaded", version, exc_info=True)
            self.refused = version
            return None
