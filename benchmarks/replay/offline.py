"""The llm-d project's offline protocol: train on a random 90 % of a trace, predict the rest.

The split is the llm-d benchmark's own (benchmarks/offline_feature_ab.py in
llm-d-latency-predictor): per target and seed, 10 % of the rows that measure it, drawn as
pandas' `sample(frac=0.1, random_state=seed)` draws them (numpy RandomState(seed).choice
without replacement), so seeds 0..9 are the splits that project reports on.

Over HTTP (the protocol that counts, `--mode offline`): per seed a fresh training server and
prediction server (production settings), the 90 % ingested in trace order through
/add_training_data_bulk in 1,000-row calls, a wait until a retrain that saw every row is
served, then the 10 % predicted through /predict/bulk/strict (the rows as recorded, without
their actuals). In process (`--mode offline-inprocess`, seconds): the same split, the
training server's own held-out share drawn as the store draws it, and the retrainer's fit
called on the same windows; no servers, no live factor (nothing is served before the test).
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from pydantic import BaseModel

from benchmarks.common import Progress
from benchmarks.replay.goals import top_share
from benchmarks.replay.inprocess import fit_as_retrainer
from benchmarks.replay.llmd_reference import llmd_predict
from benchmarks.replay.metrics import aggregate_seeds, compare, mean_std, score
from benchmarks.replay.rows import measures
from benchmarks.replay.servers import ServerPair, server_env
from shared.features import columns_from_dicts
from shared.schemas import PredictionRequest, TrainingEntry
from shared.settings import TrainingSettings
from shared.targets import TARGETS, Target
from training_server.retrain.scoring import served_ms

TEST_SHARE = 0.1
INGEST_ROWS_PER_CALL = 1_000  # the EPP's flush size
PREDICT_ROWS_PER_CALL = 1_000
SERVED_TIMEOUT_SEC = 180.0


def llmd_split(rows: list[dict[str, Any]], seed: int) -> dict[Target, list[int]]:
    """Test row positions per target, as the llm-d benchmark samples them."""
    out: dict[Target, list[int]] = {}
    for t in TARGETS:
        idx = [i for i, r in enumerate(rows) if measures(r, t)]
        size = round(TEST_SHARE * len(idx))
        chosen = np.random.RandomState(seed).choice(len(idx), size, replace=False)
        out[t] = sorted(idx[j] for j in chosen)
    return out


def training_rows(
    rows: list[dict[str, Any]], test: dict[Target, list[int]]
) -> list[dict[str, Any]]:
    """The rows to ingest, in trace order: a row loses the actual of a target it is a test
    row of (0 = not measured), and goes only if it still measures something."""
    held = {t: set(v) for t, v in test.items()}
    out = []
    for i, row in enumerate(rows):
        kept = dict(row)
        for t in TARGETS:
            if i in held[t]:
                kept[t.actual_field] = 0.0
        if any(measures(kept, t) for t in TARGETS):
            out.append(kept)
    return out


def _without_actuals(row: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("actual_")}


def _naive(train: list[dict[str, Any]], target: Target, quantile: float) -> float:
    return float(
        np.quantile([float(r[target.actual_field]) for r in train if measures(r, target)], quantile)
    )


def _score(
    rows: list[dict[str, Any]],
    positions: list[int],
    target: Target,
    predicted: np.ndarray,
    train: list[dict[str, Any]],
    seed: int,
    quantile: float,
) -> dict[str, Any]:
    """Ours against the naive p90 of the train actuals, plus the llm-d model refitted on the
    same split (benchmarks/replay/llmd_reference.py)."""
    actual = np.array([float(rows[i][target.actual_field]) for i in positions])
    out = compare(
        actual, predicted, np.full(len(actual), _naive(train, target, quantile)), quantile
    )
    out["top1pct_loss_share"] = top_share(actual, predicted, quantile)
    llmd = llmd_predict(train, [_without_actuals(rows[i]) for i in positions], target, seed)
    out["llmd_model"] = score(actual, llmd, quantile)
    return out


# over HTTP ------------------------------------------------------------------------------


def _wait_served(
    client: httpx.Client, trainer: str, predictor: str, through: int
) -> dict[str, Any]:
    """The newest ok retrain once it saw sample id `through` and the predictor serves it."""
    deadline = time.monotonic() + SERVED_TIMEOUT_SEC
    while time.monotonic() < deadline:
        rows = client.get(f"{trainer}/retrains", params={"limit": 1}).json()["retrains"]
        ok = rows and rows[0]["status"] == "ok" and rows[0]["max_sample_id"] >= through
        if (
            ok
            and client.get(f"{predictor}/status").json().get("model_version") == rows[0]["version"]
        ):
            return dict(rows[0])
        time.sleep(0.2)
    raise TimeoutError(f"no retrain through sample {through} served in {SERVED_TIMEOUT_SEC} s")


def _http_seed(
    rows: list[dict[str, Any]], seed: int, args: argparse.Namespace, quantile: float
) -> dict[str, Any]:
    test = llmd_split(rows, seed)
    train = training_rows(rows, test)
    with (
        tempfile.TemporaryDirectory(prefix="replay-offline-") as tmp,
        ServerPair(Path(tmp), server_env(Path(tmp), args)) as servers,
        httpx.Client(timeout=60.0, trust_env=False) as client,
    ):
        t0 = time.monotonic()
        for i in range(0, len(train), INGEST_ROWS_PER_CALL):
            reply = client.post(
                f"{servers.trainer.url}/add_training_data_bulk",
                json={"entries": train[i : i + INGEST_ROWS_PER_CALL]},
            )
            if reply.status_code != 202:
                raise RuntimeError(f"ingest answered {reply.status_code}: {reply.text[:300]}")
        retrain = _wait_served(client, servers.trainer.url, servers.predictor.url, len(train))
        waited = time.monotonic() - t0
        out: dict[str, Any] = {"seed": seed, "waited_s": waited, "version": retrain["version"]}
        for t in TARGETS:
            predicted = []
            for i in range(0, len(test[t]), PREDICT_ROWS_PER_CALL):
                chunk = [_without_actuals(rows[j]) for j in test[t][i : i + PREDICT_ROWS_PER_CALL]]
                reply = client.post(
                    f"{servers.predictor.url}/predict/bulk/strict", json={"requests": chunk}
                )
                reply.raise_for_status()
                predicted += [p[f"{t.value}_ms"] for p in reply.json()["predictions"]]
            scored = _score(rows, test[t], t, np.array(predicted), train, seed, quantile)
            scored["model_choice"] = retrain.get(f"{t.value}_model_choice")
            out[t.value] = scored
    return out


# in process -----------------------------------------------------------------------------


def _columns(rows: list[dict[str, Any]], model: type[BaseModel]) -> dict[str, np.ndarray]:
    return columns_from_dicts([model.model_validate(r).model_dump() for r in rows])


def _inprocess_seed(
    rows: list[dict[str, Any]], seed: int, settings: TrainingSettings
) -> dict[str, Any]:
    test = llmd_split(rows, seed)
    train = training_rows(rows, test)
    # The store's held-out share, drawn per ingested row as SampleStore draws it.
    store_rng = random.Random(seed)
    held = np.array([store_rng.random() < settings.test_train_ratio for _ in train])
    out: dict[str, Any] = {"seed": seed}
    for t in TARGETS:
        mine = np.array([measures(r, t) for r in train])

        def part(mask: np.ndarray, target: Target = t) -> tuple[dict[str, np.ndarray], np.ndarray]:
            chosen = [r for r, keep in zip(train, mask, strict=True) if keep]
            actual = np.array([float(r[target.actual_field]) for r in chosen])
            return _columns(chosen, TrainingEntry), actual

        fit = fit_as_retrainer(settings, t, part(mine & ~held), part(mine & held))
        asked = _columns([_without_actuals(rows[j]) for j in test[t]], PredictionRequest)
        predicted = served_ms(fit.backend, fit.fit, asked)
        scored = _score(rows, test[t], t, predicted, train, seed, settings.quantile_alpha)
        scored["model_choice"] = fit.choice
        out[t.value] = scored
    return out


def run_offline(
    name: str,
    rows: list[dict[str, Any]],
    args: argparse.Namespace,
    settings: TrainingSettings,
    *,
    http: bool,
) -> dict[str, Any]:
    seeds = list(range(args.seed, args.seed + args.seeds))
    bar = Progress(name, len(seeds), not args.no_progress)
    started = time.monotonic()
    runs = []
    try:
        for i, seed in enumerate(seeds):
            runs.append(
                _http_seed(rows, seed, args, settings.quantile_alpha)
                if http
                else _inprocess_seed(rows, seed, settings)
            )
            bar.update(i + 1, f"seed {seed}")
    finally:
        bar.close()
    return {
        "trace": name,
        "rows": len(rows),
        "seeds": seeds,
        "over_http": http,
        "wall_seconds": time.monotonic() - started,
        "waited_s": [r.get("waited_s") for r in runs],
        "targets": {
            t.value: {
                **aggregate_seeds([r[t.value] for r in runs]),
                "llmd_model": {
                    m: mean_std([r[t.value]["llmd_model"][m] for r in runs])
                    for m in ("coverage", "pinball_loss")
                },
                "per_seed": [r[t.value] for r in runs],
            }
            for t in TARGETS
        },
    }
