"""A loaded, verified bundle that predicts both targets: the unit a server swaps whole."""

from __future__ import annotations

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
from shared.backends import Backend, backend_for
from shared.features import Columns, build_matrix
from shared.live_calibration import NO_LIVE_OFFSETS, Blend, LiveOffsets
from shared.live_groups import group_codes
from shared.prior import PRIOR_VERSION, prior_predict
from shared.served import answer_ms, calibration_scale, compile_model, model_output
from shared.served_groups import GroupTables
from shared.settings import ModelType, ObjectiveType
from shared.target_space import TargetSpace
from shared.targets import TARGETS, Target
from shared.tree_eval import CompiledTrees


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
    # (shared.live_calibration), which changes without a new bundle; the live one may
    # differ per group of rows (shared.live_groups: P/D role, hardware class).
    log_offsets: dict[Target, float] = field(default_factory=dict)
    live: LiveOffsets = NO_LIVE_OFFSETS
    # The models as flat arrays (shared.tree_eval), where they reproduce the library.
    compiled: dict[Target, CompiledTrees] = field(default_factory=dict, repr=False)
    # exp of their sum (shared.served.calibration_scale), computed once: the predict path
    # multiplies by it; where rows fall into groups with live factors or blends of their
    # own, by their group's as `groups` holds them (shared.served_groups).
    scales: dict[Target, float] = field(init=False, repr=False)
    groups: GroupTables = field(init=False, repr=False)
    # The pool's blend with the level, per target (shared.live_calibration.Blend; where
    # the target has group blends, theirs serve instead).
    pool_blends: dict[Target, Blend] = field(init=False, repr=False)
    # Split nodes of each target's model (shared.backends.split_count). 0: the model answers
    # one constant in its space (the running p90 candidates of training_server.retrain.
    # candidates), so it tells pods apart by no feature but the queue count that space
    # divides by; a picker ranks pods by its own counts while such a model answers.
    splits: dict[Target, int] = field(default_factory=dict)
    # The library of model_type, for the models (or batches) the walk does not serve.
    backend: Backend = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(
            self,
            "scales",
            {
                t: calibration_scale(self.log_offsets.get(t, 0.0), self.live.pool.get(t, 0.0))
                for t in TARGETS
            },
        )
        group_scales = {
            t: {
                group_codes(name): calibration_scale(self.log_offsets.get(t, 0.0), live)
                for name, offsets in self.live.groups.items()
                if (live := offsets.get(t)) is not None
            }
            for t in TARGETS
        }
        group_blends: dict[Target, dict[tuple[float, float], Blend]] = {}
        for name, targets in self.live.blends.items():
            for t, blend in targets.items():
                if name:
                    group_blends.setdefault(t, {})[group_codes(name)] = blend
        object.__setattr__(
            self, "groups", GroupTables.build(self.scales, group_scales, group_blends)
        )
        object.__setattr__(self, "pool_blends", self.live.blends.get("", {}))
        object.__setattr__(self, "backend", backend_for(self.model_type))

    @property
    def is_prior(self) -> bool:
        return self.manifest is None

    def has_model(self, target: Target) -> bool:
        return self.models.get(target) is not None

    def with_live(self, offsets: LiveOffsets) -> LoadedBundle:
        """This bundle serving `offsets` as its live calibration; trained targets only
        (the cold-start prior is a documented formula, not a model to correct)."""
        live = LiveOffsets(
            pool={t: v for t, v in offsets.pool.items() if self.has_model(t)},
            groups={
                name: trained
                for name, targets in offsets.groups.items()
                if (trained := {t: v for t, v in targets.items() if self.has_model(t)})
            },
            blends={
                name: trained_blends
                for name, targets in offsets.blends.items()
                if (trained_blends := {t: b for t, b in targets.items() if self.has_model(t)})
            },
        )
        return self if live == self.live else replace(self, live=live)

    def live_log_offset(self, target: Target) -> float:
        """The pool's live log-factor served for `target` (0: none)."""
        return self.live.pool.get(target, 0.0)

    def predict(self, columns: Columns) -> dict[Target, np.ndarray]:
        """Predictions per target in ms, clamped at 0 (a latency is never negative)."""
        out: dict[Target, np.ndarray] = {}
        groups, index = self.groups, None
        for target in TARGETS:
            model = self.models.get(target)
            if model is None:
                out[target] = np.maximum(prior_predict(target, columns), 0.0)
                continue
            matrix = build_matrix(columns, self.features[target])
            output = model_output(self.backend, model, self.compiled.get(target), matrix)
            space = self.spaces.get(target, TargetSpace.MS)
            if groups.used_by(target) and index is None:
                index = groups.index(columns, len(matrix))
            by_group = groups.scales.get(target)
            scale = self.scales[target] if by_group is None or index is None else by_group[index]
            ms = answer_ms(space, columns, output, scale)
            if index is not None and target in groups.weights:
                ms = groups.blended(target, index, ms)
            elif (pool := self.pool_blends.get(target)) is not None:
                ms = pool.serve(ms)
            out[target] = ms
        return out


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
    return bundle_of(manifest, load_models(bundle_dir, manifest))


def bundle_of(manifest: Manifest, models: dict[Target, Any | None]) -> LoadedBundle:
    """The bundle `manifest` describes, serving `models` (loaded and verified from its
    files by shared.artifact.load_models): the walk compiled and probed for each."""
    backend = backend_for(manifest.model_type)
    compiled = {}
    for target, model in models.items():
        if model is not None:
            fast = compile_model(backend, model, len(manifest.targets[target].features))
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
        splits={t: backend.split_count(m) for t, m in models.items() if m is not None},
    )


def load_current_bundle(model_dir: Path) -> LoadedBundle | None:
    """The published bundle, or None when nothing is published yet."""
    version = read_current_version(model_dir)
    return None if version is None else load_bundle(model_dir, version)
