"""Tree ensembles as flat numpy arrays, evaluated for a whole batch in a few vector steps.

On the hot path the libraries' own predict costs more in fixed overhead than in trees: for
one row, XGBoost's inplace_predict takes ~250 us per model (benchmarks/README.md). Here every
tree is padded to a complete binary tree of the ensemble's depth (a leaf above the bottom
becomes splits that always go left), so a walk is one comparison and one index update per
level. The walk runs in C (shared/_treewalk.c, built at install) and, where it could not be
built, in numpy: all trees of a batch together, one gather, compare and update per level.

Exactness: XGBoost goes left when x < threshold in float32, LightGBM when x <= threshold in
float64; both are reproduced as such. Our feature rows never hold NaN (the decoder refuses
them), so default directions do not arise. Every compiled model is checked against the
library on probe rows built around its own thresholds when it is loaded; a mismatch (a
model shape this module does not know) keeps the library's predict for that model.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import orjson

_treewalk: Any
try:
    from shared import _treewalk  # type: ignore[attr-defined, no-redef]  # built by setup.py
except ImportError:  # installed without a C compiler
    _treewalk = None

# Which walk serves: /status and the benchmarks report it.
EVALUATOR = "c" if _treewalk is not None else "numpy"

# Deeper trees would take 2^depth nodes each; the library evaluates those better.
MAX_DEPTH = 10
# XGBoost objectives whose prediction is the raw sum of leaves (ours, and older bundles').
IDENTITY_OBJECTIVES = {"reg:squarederror", "reg:quantileerror", "reg:absoluteerror"}
PROBE_ROWS = 256
RTOL = 1e-5


@dataclass(frozen=True)
class CompiledTrees:
    depth: int
    features: np.ndarray  # (trees * internal,) int32: split feature per internal node
    thresholds: np.ndarray  # (trees * internal,): float32 for XGBoost, float64 for LightGBM
    leaves: np.ndarray  # (trees, 2**depth) float64
    base: float  # added to every output
    left_if_equal: bool  # LightGBM: x <= t goes left; XGBoost: only x < t
    # The C walk's form: float64, and a row goes right when x >= it. For LightGBM that is
    # the next double above t (x > t exactly when x >= nextafter(t)).
    right_from: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        thresholds = self.thresholds.astype(np.float64)
        if self.left_if_equal:
            thresholds = np.nextafter(thresholds, np.inf)
        object.__setattr__(self, "right_from", thresholds)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """Raw model output per row of x, a float32 feature matrix (build_matrix)."""
        return self.predict_numpy(x) if _treewalk is None else self.predict_c(x)

    def predict_c(self, x: np.ndarray) -> np.ndarray:
        rows = np.ascontiguousarray(x, dtype=np.float32)
        out = np.empty(len(rows), dtype=np.float64)
        n_trees = self.leaves.shape[0]
        _treewalk.walk(
            rows,
            self.features,
            self.right_from,
            self.leaves,
            out,
            rows.shape[0],
            rows.shape[1],
            n_trees,
            self.depth,
            self.base,
        )
        return out

    def predict_numpy(self, x: np.ndarray) -> np.ndarray:
        n_trees, width = self.leaves.shape
        internal = width - 1
        n = x.shape[0]
        # feature-major, so feature f of row r sits at f * n + r
        values = np.ascontiguousarray(x.T, dtype=self.thresholds.dtype).ravel()
        rows = np.arange(n, dtype=np.int32)
        # at = tree * internal + node: walk down by at -> 2 * at + 1 + right - tree * internal
        tree_base = (np.arange(n_trees, dtype=np.int32) * internal)[:, None]
        at = np.repeat(tree_base, n, axis=1)
        compare = np.greater if self.left_if_equal else np.greater_equal
        offsets = self.features * n  # where each node's feature column starts in `values`
        for _ in range(self.depth):
            v = np.take(values, np.take(offsets, at) + rows)
            right = compare(v, np.take(self.thresholds, at))
            at += at - tree_base + 1
            at += right
        leaf_at = at - tree_base - internal + (np.arange(n_trees, dtype=np.int32) * width)[:, None]
        walked: np.ndarray = self.base + np.take(self.leaves, leaf_at).sum(axis=0)
        return walked


@dataclass(frozen=True)
class _Nodes:
    """Every node of an ensemble in flat arrays (global ids; a leaf has left == -1)."""

    left: np.ndarray
    right: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray  # a split's threshold, or a leaf's value
    roots: np.ndarray  # the root id of each tree


def _layout(nodes: _Nodes, threshold_dtype: Any, base: float, left_if_equal: bool) -> CompiledTrees:
    """Every tree as a complete tree of the ensemble's depth, all trees a level at a time in
    numpy (a bundle swap holds the interpreter ~1 ms here, not ~12 in per-node Python). A
    leaf above the bottom becomes splits at +inf (always left) over copies of its value."""
    n_trees = len(nodes.roots)
    # per level: (node ids, tree index, position in the complete tree)
    levels: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    ids, tree, pos = nodes.roots, np.arange(n_trees), np.zeros(n_trees, dtype=np.int64)
    while len(ids):
        if len(levels) > MAX_DEPTH:
            raise ValueError(f"depth > {MAX_DEPTH}")
        levels.append((ids, tree, pos))
        split = nodes.left[ids] != -1
        ids, tree, pos = (
            np.concatenate([nodes.left[ids[split]], nodes.right[ids[split]]]),
            np.tile(tree[split], 2),
            np.concatenate([2 * pos[split] + 1, 2 * pos[split] + 2]),
        )
    depth = max(len(levels) - 1, 1)
    internal = 2**depth - 1
    features = np.zeros((n_trees, internal), dtype=np.int32)
    thresholds = np.full((n_trees, internal), np.inf, dtype=threshold_dtype)
    leaves = np.zeros((n_trees, internal + 1), dtype=np.float64)
    for level, (ids, tree, pos) in enumerate(levels):
        split = nodes.left[ids] != -1
        features[tree[split], pos[split]] = nodes.feature[ids[split]]
        thresholds[tree[split], pos[split]] = nodes.threshold[ids[split]]
        leaf = ~split
        span = 2 ** (depth - level)  # bottom slots under a leaf at this level
        first = pos[leaf] * span + (span - 1) - internal
        slots = first[:, None] + np.arange(span)[None, :]
        leaves[tree[leaf][:, None], slots] = nodes.threshold[ids[leaf]][:, None]
    return CompiledTrees(depth, features.ravel(), thresholds.ravel(), leaves, base, left_if_equal)


def _flat(lists: Any, dtype: Any) -> np.ndarray:
    return np.fromiter(chain.from_iterable(lists), dtype=dtype)


def compile_xgboost(booster: Any) -> CompiledTrees:
    model = orjson.loads(booster.save_raw("json"))["learner"]
    if model["gradient_booster"]["name"] != "gbtree":
        raise ValueError("only gbtree models are compiled")
    if model["objective"]["name"] not in IDENTITY_OBJECTIVES:
        raise ValueError(f"objective {model['objective']['name']} has an output transform")
    trees = model["gradient_booster"]["model"]["trees"]
    if any(t["categories"] for t in trees):
        raise ValueError("categorical splits are not compiled")
    sizes = np.array([len(t["left_children"]) for t in trees], dtype=np.int64)
    offsets = np.cumsum(sizes) - sizes  # each tree's first node: its root
    shift = np.repeat(offsets, sizes)  # a node's tree offset, to make child ids global
    left = _flat((t["left_children"] for t in trees), np.int64)
    right = _flat((t["right_children"] for t in trees), np.int64)
    nodes = _Nodes(
        left=np.where(left == -1, -1, left + shift),
        right=np.where(right == -1, -1, right + shift),
        feature=_flat((t["split_indices"] for t in trees), np.int32),
        threshold=_flat((t["split_conditions"] for t in trees), np.float64),
        roots=offsets,
    )
    base = float(model["learner_model_param"]["base_score"].strip("[]"))
    return _layout(nodes, np.float32, base, left_if_equal=False)


def compile_lightgbm(booster: Any) -> CompiledTrees:
    left: list[int] = []
    right: list[int] = []
    feature: list[int] = []
    threshold: list[float] = []

    def add(node: dict[str, Any]) -> int:
        at = len(left)
        left.append(-1)
        right.append(-1)
        if "leaf_value" in node:
            feature.append(0)
            threshold.append(node["leaf_value"])
            return at
        if node.get("decision_type") != "<=":
            raise ValueError(f"decision {node.get('decision_type')} is not compiled")
        feature.append(node["split_feature"])
        threshold.append(node["threshold"])
        left[at] = add(node["left_child"])
        right[at] = add(node["right_child"])
        return at

    roots = [add(t["tree_structure"]) for t in booster.dump_model()["tree_info"]]
    nodes = _Nodes(
        np.array(left, dtype=np.int64),
        np.array(right, dtype=np.int64),
        np.array(feature, dtype=np.int32),
        np.array(threshold, dtype=np.float64),
        np.array(roots, dtype=np.int64),
    )
    return _layout(nodes, np.float64, 0.0, left_if_equal=True)


def probe_rows(compiled: CompiledTrees, n_features: int, seed: int = 0) -> np.ndarray:
    """Rows whose values sit on, just below and just above the model's own thresholds."""
    rng = np.random.default_rng(seed)
    probes = np.zeros((PROBE_ROWS, n_features), dtype=np.float32)
    finite = np.isfinite(compiled.thresholds)
    for f in range(n_features):
        cuts = compiled.thresholds[finite & (compiled.features == f)].astype(np.float32)
        if len(cuts):
            picked = rng.choice(cuts, PROBE_ROWS)
            toward = rng.choice(np.array([-np.inf, 0.0, np.inf], dtype=np.float32), PROBE_ROWS)
            toward = np.where(toward == 0, picked, toward)
            probes[:, f] = np.nextafter(picked, toward)
        else:
            probes[:, f] = rng.uniform(0, 1000, PROBE_ROWS)
    return probes


def compiled_or_none(
    compile_fn: Callable[[Any], CompiledTrees],
    model: Any,
    n_features: int,
    library_predict: Callable[[Any, np.ndarray], np.ndarray],
) -> CompiledTrees | None:
    """The compiled form when it reproduces the library on probe rows, else None."""
    try:
        compiled = compile_fn(model)
    except (ValueError, KeyError, TypeError):
        return None
    probes = probe_rows(compiled, n_features)
    want = library_predict(model, probes)
    got = compiled.predict(probes)
    if not np.allclose(got, want, rtol=RTOL, atol=1e-6):
        return None
    return compiled
