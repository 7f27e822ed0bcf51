"""A loaded, verified bundle that predicts both targets: the unit a server swaps whole."""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from shared.artifact import (
    BundleError,
    Manifest,
    bundle_dir_for,
    load_models,
    read_current_version,
    read_manifest,
)
from shared.backends import backend_for
from shared.features import Columns, build_matrix
from shared.prior import PRIOR_VERSION, prior_predict
from shared.settings import ModelType, ObjectiveType
from shared.target_space import TargetSpace, to_ms
from shared.targets import TARGETS, Target
from shared.tree_eval import EVALUATOR, CompiledTrees, compiled_or_none

# The C walk beats the libraries' predict at every batch size (no ~110 us fixed cost per
# call, and 1.5-2x faster per row); the numpy fallback only up to this many rows, above
# which the libraries' C++ wins (benchmarks/README.md, bench_predict.py).
NUMPY_WALK_MAX_ROWS = 32


def walk_serves(rows: int) -> bool:
    """Whether a compiled model, rather than the library, predicts a batch of `rows`."""
    return EVALUATOR == "c" or rows <= NUMPY_WALK_MAX_ROWS


@dataclass(frozen=True)
class LoadedBundle:
    """Immutable: a server replaces the whole object, so TTFT and TPOT always match."""

    version: str
    model_type: ModelType
    objective: ObjectiveType
    quantile: float
    models: dict[Target, Any | None]
    features: dict[Target, tuple[str, ...]]
    manifest: Manifest | None = None
    loaded_at: datetime = field(default_factory=lambda: datetime.now(UTC))
    spaces: dict[Target, TargetSpace] = field(default_factory=dict)
    # Calibration per target, as log factors: the bundle's conformal one and the live one
    # (shared.live_calibration), which changes without a new bundle.
    log_offsets: dict[Target, float] = field(default_factory=dict)
    live_log_offsets: dict[Target, float] = field(default_factory=dict)
    # The models as flat arrays (shared.tree_eval), where they reproduce the library.
    compiled: dict[Target, CompiledTrees] = field(default_factory=dict, repr=False)
    # exp of their sum, computed once: the predict path multiplies by it.
    scales: dict[Target, float] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "scales",
            {
                t: math.exp(self.log_offsets.get(t, 0.0) + self.live_log_offsets.get(t, 0.0))
                for t in TARGETS
            },
        )

    @property
    def is_prior(self) -> bool:
        return self.manifest is None

    def has_model(self, target: Target) -> bool:
        return self.models.get(target) is not None

    def with_live(self, log_offsets: dict[Target, float]) -> LoadedBundle:
        """This bundle serving `log_offsets` as its live calibration; trained targets only
        (the cold-start prior is a documented formula, not a model to correct)."""
        live = {t: v for t, v in log_offsets.items() if self.has_model(t)}
        return self if live == self.live_log_offsets else replace(self, live_log_offsets=live)

    def predict(self, columns: Columns) -> dict[Target, np.ndarray]:
        """Predictions per target in ms, clamped at 0 (a latency is never negative)."""
        out: dict[Target, np.ndarray] = {}
        for target in TARGETS:
            model = self.models.get(target)
            if model is None:
                values = prior_predict(target, columns)
            else:
                values = self.raw_predict(target, columns) * self.scales[target]
            out[target] = np.maximum(values, 0.0)
        return out

    def raw_predict(self, target: Target, columns: Columns) -> np.ndarray:
        """The model's answer in ms before any calibration (target must have a model)."""
        matrix = build_matrix(columns, self.features[target])
        compiled = self.compiled.get(target)
        if compiled is not None and walk_serves(len(matrix)):
            output = compiled.predict(matrix)
        else:
            output = backend_for(self.model_type).predict(self.models[target], matrix)
        return to_ms(self.spaces.get(target, TargetSpace.MS), columns, output)


def prior_bundle(model_type: ModelType, objective: ObjectiveType, quantile: float) -> LoadedBundle:
    return LoadedBundle(
        version=PRIOR_VERSION,
        model_type=model_type,
        objective=objective,
        quantile=quantile,
        models={t: None for t in TARGETS},
        features={t: () for t in TARGETS},
    )


def load_bundle(model_dir: Path, version: str) -> LoadedBundle:
    """Read and verify one published version; raises BundleError."""
    bundle_dir = bundle_dir_for(model_dir, version)
    manifest = read_manifest(bundle_dir)
    if manifest.version != version:
        raise BundleError(f"{version}: manifest says version {manifest.version}")
    models = load_models(bundle_dir, manifest)
    backend = backend_for(manifest.model_type)
    compiled = {}
    for target, model in models.items():
        if model is not None:
            fast = compiled_or_none(
                backend.compile, model, len(manifest.targets[target].features), backend.predict
            )
            if fast is not None:
                compiled[target] = fast
    return LoadedBundle(
        version=manifest.version,
        model_type=manifest.model_type,
        objective=manifest.objective,
        quantile=manifest.quantile,
        models=models,
        features={t: tuple(manifest.targets[t].features) for t in TARGETS},
        manifest=manifest,
        spaces={t: manifest.targets[t].space for t in TARGETS},
        compiled=compiled,
        log_offsets={t: manifest.targets[t].calibration_log_offset for t in TARGETS},
    )


def load_current_bundle(model_dir: Path) -> LoadedBundle | None:
    """The published bundle, or None when nothing is published yet."""
    version = read_current_version(model_dir)
    return None if version is None else load_bundle(model_dir, version)
