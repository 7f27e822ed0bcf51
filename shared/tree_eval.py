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
from typing import Any

import numpy as np
import orjson

try:
    from shared import _treewalk
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
        _treewalk.walk(rows, self.features, self.right_from, self.leaves, out,
                       rows.shape[0], rows.shape[1], n_trees, self.depth, self.base)
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
        return self.base + np.take(self.leaves, leaf_at).sum(axis=0)


class _Builder:
    """Lays trees of any shape out as complete trees of one depth."""

    def __init__(self, n_trees: int, depth: int, threshold_dtype: Any):
        internal = 2**depth - 1
        self.depth = depth
        self.features = np.zeros((n_trees, internal), dtype=np.int32)
        self.thresholds = np.full((n_trees, internal), np.inf, dtype=threshold_dtype)
        self.leaves = np.zeros((n_trees, internal + 1), dtype=np.float64)

    def place(self, tree: int, node: Any, children: Callable[[Any], tuple[Any, Any] | None],
              split: Callable[[Any], tuple[int, float]], value: Callable[[Any], float],
              pos: int = 0, level: int = 0) -> None:
        kids = children(node)
        if level == self.depth:
            if kids is not None:
                raise ValueError("tree deeper than its ensemble's depth")
            self.leaves[tree, pos - (2**self.depth - 1)] = value(node)
            return
        if kids is None:  # a leaf above the bottom: +inf threshold, always left; copy right
            self.place(tree, node, children, split, value, 2 * pos + 1, level + 1)
            self.place(tree, node, children, split, value, 2 * pos + 2, level + 1)
            return
        self.features[tree, pos], self.thresholds[tree, pos] = split(node)
        self.place(tree, kids[0], children, split, value, 2 * pos + 1, level + 1)
        self.place(tree, kids[1], children, split, value, 2 * pos + 2, level + 1)

    def build(self, base: float, left_if_equal: bool) -> CompiledTrees:
        return CompiledTrees(self.depth, self.features.ravel(), self.thresholds.ravel(),
                             self.leaves, base, left_if_equal)


def _xgb_depth(tree: dict[str, Any], node: int = 0) -> int:
    left = tree["left_children"][node]
    if left == -1:
        return 0
    return 1 + max(_xgb_depth(tree, left), _xgb_depth(tree, tree["right_children"][node]))


def compile_xgboost(booster: Any) -> CompiledTrees:
    model = orjson.loads(booster.save_raw("json"))["learner"]
    if model["gradient_booster"]["name"] != "gbtree":
        raise ValueError("only gbtree models are compiled")
    if model["objective"]["name"] not in IDENTITY_OBJECTIVES:
        raise ValueError(f"objective {model['objective']['name']} has an output transform")
    trees = model["gradient_booster"]["model"]["trees"]
    if any(t["categories"] for t in trees):
        raise ValueError("categorical splits are not compiled")
    depth = max([_xgb_depth(t) for t in trees] + [1])
    if depth > MAX_DEPTH:
        raise ValueError(f"depth {depth} > {MAX_DEPTH}")
    builder = _Builder(len(trees), depth, np.float32)
    for i, t in enumerate(trees):
        left, right = t["left_children"], t["right_children"]
        builder.place(
            i, 0,
            children=lambda n, left=left, right=right: None if left[n] == -1 else (left[n], right[n]),
            split=lambda n, t=t: (t["split_indices"][n], t["split_conditions"][n]),
            value=lambda n, t=t: t["split_conditions"][n],
        )
    base = float(model["learner_model_param"]["base_score"].strip("[]"))
    return builder.build(base, left_if_equal=False)


def _lgb_depth(node: dict[str, Any]) -> int:
    if "leaf_value" in node:
        return 0
    return 1 + max(_lgb_depth(node["left_child"]), _lgb_depth(node["right_child"]))


def compile_lightgbm(booster: Any) -> CompiledTrees:
    model = booster.dump_model()
    roots = [t["tree_structure"] for t in model["tree_info"]]
    depth = max([_lgb_depth(r) for r in roots] + [1])
    if depth > MAX_DEPTH:
        raise ValueError(f"depth {depth} > {MAX_DEPTH}")
    builder = _Builder(len(roots), depth, np.float64)
    for i, root in enumerate(roots):

        def split(n: dict[str, Any]) -> tuple[int, float]:
            if n.get("decision_type") != "<=":
                raise ValueError(f"decision {n.get('decision_type')} is not compiled")
            return n["split_feature"], n["threshold"]

        builder.place(
            i, root,
            children=lambda n: None if "leaf_value" in n else (n["left_child"], n["right_child"]),
            split=split,
            value=lambda n: n["leaf_value"],
        )
    return builder.build(0.0, left_if_equal=True)


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


def compiled_or_none(compile_fn: Callable[[Any], CompiledTrees], model: Any, n_features: int,
                     library_predict: Callable[[Any, np.ndarray], np.ndarray]
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
