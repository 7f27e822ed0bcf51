"""Replay a recorded trace through the real servers the way the EPP uses them, and score the
p90 predictions against a naive running p90.

    .venv/bin/python -m benchmarks.replay [--trace NAME_OR_PATH ...] [--mode online|offline]
        [--rows-per-batch 50] [--batch-seconds 1] [--speedup 1] [--retrain-interval 2]
        [--windows 4] [--model-type xgboost|lightgbm] [--objective quantile|mean]
        [--calibration none|split|adaptive]
        [--seed 0] [--seeds 1] [--json] [--training-url URL --prediction-url URL]

Online (default): the traces carry no timestamps, so rows arrive in file order (which is the
capture order: the load ramps up through the trace), `--rows-per-batch` rows per simulated
second. Per batch, as the EPP does: POST the rows (without actuals, with the EPP's
prediction-time constants) to /predict/bulk/strict, keep the predictions, then POST the
same rows with their actuals and our predictions to /add_training_data_bulk. Batch k is sent
at k * batch_seconds / speedup wall seconds; the servers retrain every --retrain-interval
wall seconds. Each row is scored only for the target it measures (actual > 0). The naive
predictor answers, for every row of a batch, the running p90 of all actuals of that target
sent before the batch. Both are scored only after the first --warmup-batches (2) batches, so
the naive p90 always has data; cold-start-prior answers are in "overall" and left out of
"after 1st model".

Offline (--mode offline): no servers. Per target and seed, a random 90/10 split of the rows
that measure it; the 90 % is trained on exactly as the training server would (its
LATENCY_TEST_TRAIN_RATIO share held out, oldest first, for whatever fit_target does with
held-out rows, then predictions as a prediction server serves them); the 10 % is scored and
compared with the p90 of the 90 %'s actuals. --seeds N averages over seeds seed..seed+N-1.

Talks only to 127.0.0.1; every loop is bounded in count and time; it ends the servers it
started, by PID.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import httpx
import numpy as np

from benchmarks.replay_inprocess import run_inprocess
from benchmarks.replay_metrics import (
    HEADER,
    OFFLINE_HEADER,
    TargetRecords,
    aggregate_seeds,
    compare,
    offline_row,
    online_table,
    summarize_online,
)
from benchmarks.traces import TRACE_DIR, load_trace, prediction_rows
from latency_cli.processes import ServerProcess, free_port
from shared.backends import backend_for
from shared.features import columns_from_dicts, feature_names
from shared.prior import PRIOR_VERSION
from shared.schemas import PredictionRequest, TrainingEntry
from shared.settings import Calibration, ModelType, ObjectiveType, TrainingSettings
from shared.target_space import space_for
from shared.targets import TARGETS, Target
from training_server.training import fit_params, fit_target, served_ms

DEFAULT_TRACES = ("sharegpt-h200", "chatbot-synthetic-h200")
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LARGE = "1000000"  # retention caps: every replayed row stays trainable


def say(text: str = "") -> None:
    print(text, flush=True)


def note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def load_rows(spec: str) -> tuple[str, list[dict[str, Any]]]:
    """A trace name in TRACE_DIR, or a path to any file in the same JSON-lines format."""
    path = Path(spec)
    if path.suffix == ".jsonl" or path.is_file():
        with path.open() as fh:
            return path.stem, [json.loads(line) for line in fh if line.strip()]
    if not (TRACE_DIR / f"{spec}.jsonl").is_file():
        known = ", ".join(sorted(p.stem for p in TRACE_DIR.glob("*.jsonl")))
        raise SystemExit(f"no trace {spec!r} (known: {known}; or give a .jsonl path)")
    return spec, load_trace(spec)


def measures(row: dict[str, Any], target: Target) -> bool:
    return float(row.get(target.actual_field) or 0) > 0


def git_state() -> str:
    root = Path(__file__).resolve().parents[1]
    try:
        def git(*cmd: str) -> str:
            return subprocess.run(["git", *cmd], cwd=root, text=True, capture_output=True,
                                  timeout=10, check=False).stdout.strip()

        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" (uncommitted changes)" if dirty else "")


class Progress:
    """One "\\r" line on stderr."""

    def __init__(self, label: str, total: int, enabled: bool = True):
        self.label, self.total, self.enabled = label, max(total, 1), enabled
        self.started = time.monotonic()

    def update(self, done: int, extra: str = "") -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / self.total)
        bar = "#" * filled + "." * (width - filled)
        sys.stderr.write(f"\r{self.label} [{bar}] {done}/{self.total} "
                         f"{time.monotonic() - self.started:5.1f}s {extra:<40}")
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


# online ---------------------------------------------------------------------------------

def server_env(workdir: Path, args: argparse.Namespace) -> dict[str, str]:
    env = {
        "LATENCY_DB_URL": f"sqlite:///{workdir / 'replay.db'}",
        "LATENCY_MODEL_DIR": str(workdir / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": str(args.retrain_interval),
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "1",
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": LARGE,
        "LATENCY_MAX_TEST_DATA_SIZE": LARGE,
        "LATENCY_MAX_TRAINING_WINDOW": LARGE,
    }
    if args.model_type:
        env["LATENCY_MODEL_TYPE"] = args.model_type
    if args.objective:
        env["LATENCY_OBJECTIVE_TYPE"] = args.objective
    if args.calibration:
        env["LATENCY_CALIBRATION"] = args.calibration
    # The EPP sends its rows once a second and the leader scores them as often: one batch.
    env["LATENCY_CALIBRATION_INTERVAL_SEC"] = str(args.batch_seconds / args.speedup)
    return env


def check_local(url: str) -> str:
    host = urlparse(url).hostname
    if host not in LOCAL_HOSTS:
        raise SystemExit(f"{url}: replay talks only to 127.0.0.1")
    return url.rstrip("/")


class TrainedTargets:
    """Which targets a bundle version answers with a trained model (not the prior), from the
    prediction server's /status, asked once per version (a version's bundle never changes)."""

    def __init__(self, client: httpx.Client, prediction_url: str):
        self.client, self.url = client, prediction_url
        self.known: dict[str, dict[Target, bool]] = {}
        self.guessed: set[str] = set()

    def of(self, version: str) -> dict[Target, bool]:
        if version == PRIOR_VERSION:
            return {t: False for t in TARGETS}
        if version not in self.known:
            status = self.client.get(f"{self.url}/status").json()
            exists = status.get("models_exist", {})
            answer = {t: bool(exists.get(f"{t.value}_model", True)) for t in TARGETS}
            if status.get("model_version") == version:
                self.known[version] = answer
            else:  # already swapped to a newer one: assume both trained, and say so
                self.guessed.add(version)
                return {t: True for t in TARGETS}
        return self.known[version]


def replay_online(name: str, rows: list[dict[str, Any]], training_url: str,
                  prediction_url: str, args: argparse.Namespace, quantile: float,
                  progress: bool) -> dict[str, Any]:
    per = args.rows_per_batch
    batches = [rows[i:i + per] for i in range(0, len(rows), per)]
    step = args.batch_seconds / args.speedup
    records = {t: TargetRecords() for t in TARGETS}
    seen: dict[Target, list[float]] = {t: [] for t in TARGETS}
    versions: list[str] = []
    first_model_batch: int | None = None
    truncated = False
    sent = 0
    bar = Progress(name, len(batches), progress)
    client = httpx.Client(timeout=30.0, trust_env=False)
    trained_of = TrainedTargets(client, prediction_url)
    started = time.monotonic()
    deadline = started + args.max_seconds
    try:
        for k, batch in enumerate(batches):
            due = started + k * step
            now = time.monotonic()
            if now > deadline or due > deadline:
                truncated = True
                break
            if due > now:
                time.sleep(due - now)
            naive = {t: (float(np.quantile(seen[t], quantile)) if seen[t] else None)
                     for t in TARGETS}
            reply = client.post(f"{prediction_url}/predict/bulk/strict",
                                json={"requests": prediction_rows(batch)})
            if reply.status_code != 200:
                raise RuntimeError(f"predict answered {reply.status_code}: {reply.text[:500]}")
            body = reply.json()
            version = body["model_version"]
            if not versions or versions[-1] != version:
                versions.append(version)
            trained = trained_of.of(version)
            if first_model_batch is None and any(trained.values()):
                first_model_batch = k
            predictions = body["predictions"]
            base = k * per
            for offset, (row, pred) in enumerate(zip(batch, predictions, strict=True)):
                for t in TARGETS:
                    if k < args.warmup_batches or not measures(row, t) or naive[t] is None:
                        continue
                    records[t].add(base + offset, float(row[t.actual_field]),
                                   float(pred[f"{t.value}_ms"]), naive[t], trained[t])
            entries = [{**row, "predicted_ttft_ms": p["ttft_ms"], "predicted_tpot_ms": p["tpot_ms"]}
                       for row, p in zip(batch, predictions, strict=True)]
            ingest = client.post(f"{training_url}/add_training_data_bulk",
                                 json={"entries": entries})
            if ingest.status_code != 202:
                raise RuntimeError(f"ingest answered {ingest.status_code}: {ingest.text[:500]}")
            for t in TARGETS:
                seen[t].extend(float(r[t.actual_field]) for r in batch if measures(r, t))
            sent += len(batch)
            bar.update(k + 1, f"model {version[-19:]}")
        wall = time.monotonic() - started
        retrains = client.get(f"{training_url}/retrains", params={"limit": 1000}).json()["retrains"]
    finally:
        bar.close()
        client.close()
    ok = [r for r in retrains if r.get("status") == "ok"]
    if args.dump_rows:
        with open(args.dump_rows, "a") as fh:
            for t in TARGETS:
                r = records[t]
                for i, a, m, n in zip(r.index, r.actual, r.model, r.naive, strict=True):
                    fh.write(json.dumps({"trace": name, "target": t.value, "row": i,
                                         "actual": a, "served": m, "naive": n}) + "\n")
    return {
        "trace": name,
        "rows": len(rows),
        "rows_sent": sent,
        "batches": len(batches),
        "truncated": truncated,
        "wall_seconds": wall,
        "rows_per_retrain_interval": per * args.retrain_interval * args.speedup
                                     / args.batch_seconds,
        "model_versions_served": len([v for v in versions if v != PRIOR_VERSION]),
        "first_model_batch": first_model_batch,
        "versions_assumed_trained": sorted(trained_of.guessed),
        "retrains_ok": len(ok),
        "retrain_seconds_mean": (float(np.mean([r["duration_s"] for r in ok])) if ok else None),
        "targets": {t.value: summarize_online(records[t], sent, args.windows, quantile)
                    for t in TARGETS},
    }


def run_online(name: str, rows: list[dict[str, Any]], args: argparse.Namespace,
               quantile: float) -> dict[str, Any]:
    progress = not args.no_progress
    if args.training_url:
        return replay_online(name, rows, check_local(args.training_url),
                             check_local(args.prediction_url), args, quantile, progress)
    with tempfile.TemporaryDirectory(prefix="replay-") as tmp:
        workdir = Path(tmp)
        env = server_env(workdir, args)
        trainer = ServerProcess("training_server", free_port(), env, workdir / "training.log")
        predictor = ServerProcess("prediction_server", free_port(), env, workdir / "prediction.log")
        try:
            trainer.start()
            predictor.start()
            return replay_online(name, rows, trainer.url, predictor.url, args, quantile,
                                 progress)
        except Exception:
            for server in (trainer, predictor):
                if server.log_path.is_file():
                    note(f"--- {server.module} log tail ---\n"
                         f"{server.log_path.read_text(errors='replace')[-3000:]}")
            raise
        finally:
            for server in (predictor, trainer):
                server.stop()


# offline --------------------------------------------------------------------------------

def _validated(rows: list[dict[str, Any]], model: type) -> list[dict[str, Any]]:
    return [model.model_validate(r).model_dump() for r in rows]


def offline_target(rows: list[dict[str, Any]], target: Target, seed: int,
                   settings: TrainingSettings) -> dict[str, Any]:
    idx = np.array([i for i, r in enumerate(rows) if measures(r, target)], dtype=np.int64)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(len(idx))
    n_test = max(1, round(0.1 * len(idx)))
    test_idx = np.sort(idx[perm[:n_test]])
    train_idx = np.sort(idx[perm[n_test:]])
    # Inside the 90 %: the store's own random held-out share, kept oldest first.
    store_rng = random.Random(seed)
    held = np.array([store_rng.random() < settings.test_train_ratio for _ in train_idx],
                    dtype=bool)
    field = target.actual_field

    def part(positions: np.ndarray) -> tuple[dict[str, np.ndarray], np.ndarray]:
        chosen = _validated([rows[i] for i in positions], TrainingEntry)
        return columns_from_dicts(chosen), np.array([r[field] for r in chosen], dtype=np.float64)

    names = feature_names(target, token_in_flight=settings.enable_token_in_flight_features,
                          encoder=settings.enable_encoder_features)
    backend = backend_for(settings.model_type)
    fit = fit_target(backend, fit_params(settings, target, names), names,
                     part(train_idx[~held]), part(train_idx[held]), space=space_for(target),
                     min_samples=1, calibrate=settings.calibration is not Calibration.NONE)
    # What a prediction server answers for this fit: the EPP's prediction-time row, the
    # model and its calibration factor, clamped at 0.
    test_rows = [rows[i] for i in test_idx]
    test_cols = columns_from_dicts(_validated(prediction_rows(test_rows), PredictionRequest))
    scale = math.exp(fit.log_offset)
    predicted = served_ms(backend, fit, test_cols)
    y_test = np.array([float(r[field]) for r in test_rows])
    y_train = np.array([float(rows[i][field]) for i in train_idx])
    naive = np.full(len(y_test), float(np.quantile(y_train, settings.quantile_alpha)))
    out = compare(y_test, predicted, naive, settings.quantile_alpha)
    out["calibration_factor"] = scale
    return out


def run_offline(name: str, rows: list[dict[str, Any]], args: argparse.Namespace,
                settings: TrainingSettings) -> dict[str, Any]:
    seeds = list(range(args.seed, args.seed + args.seeds))
    bar = Progress(name, len(seeds) * len(TARGETS), not args.no_progress)
    started = time.monotonic()
    per_target: dict[str, list[dict[str, Any]]] = {t.value: [] for t in TARGETS}
    try:
        for i, seed in enumerate(seeds):
            for j, t in enumerate(TARGETS):
                per_target[t.value].append(offline_target(rows, t, seed, settings))
                bar.update(i * len(TARGETS) + j + 1, f"seed {seed} {t.value}")
    finally:
        bar.close()
    return {
        "trace": name, "rows": len(rows), "seeds": seeds,
        "wall_seconds": time.monotonic() - started,
        "targets": {
            t: {**aggregate_seeds(runs), "per_seed": runs} for t, runs in per_target.items()
        },
    }


# main -----------------------------------------------------------------------------------

def print_online(result: dict[str, Any], args: argparse.Namespace) -> None:
    say(f"\n## online replay: {result['trace']} ({result['rows']} rows, {result['batches']} "
        f"batches of {args.rows_per_batch}, one every {args.batch_seconds / args.speedup:g} s; "
        f"retrain every {args.retrain_interval:g} s = ~{result['rows_per_retrain_interval']:.0f}"
        f" rows)")
    first = result["first_model_batch"]
    say(f"wall {result['wall_seconds']:.1f} s, {result['retrains_ok']} retrains "
        f"(mean {result['retrain_seconds_mean'] or 0:.2f} s), "
        f"{result['model_versions_served']} model versions served, first trained model at "
        f"batch {'-' if first is None else first + 1}"
        f"{'; TRUNCATED by --max-seconds' if result['truncated'] else ''}")
    say(f"scored: rows from batch {args.warmup_batches + 1} on, each for the target it "
        f"measures; naive = running p90 of the actuals sent before the batch")
    say(HEADER)
    for target, summary in result["targets"].items():
        for line in online_table(target, summary):
            say(line)


def print_inprocess(result: dict[str, Any], args: argparse.Namespace) -> None:
    say(f"\n## in-process replay: {result['trace']} ({result['rows']} rows, "
        f"{result['batches']} batches of {args.rows_per_batch}, a retrain every "
        f"{args.retrain_interval / args.batch_seconds:g} batches, held-out seed {args.seed})")
    say(HEADER)
    for target, summary in result["targets"].items():
        for line in online_table(target, summary):
            say(line)


def print_offline(result: dict[str, Any]) -> None:
    seeds = result["seeds"]
    say(f"\n## offline 90/10: {result['trace']} ({result['rows']} rows, seeds "
        f"{seeds[0]}..{seeds[-1]}, mean±std over seeds; naive = p90 of the train actuals)")
    say(OFFLINE_HEADER)
    for target, agg in result["targets"].items():
        say(offline_row(target, agg))


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append", metavar="NAME_OR_PATH",
                        help=f"repeatable; default: {' and '.join(DEFAULT_TRACES)}")
    parser.add_argument("--mode", choices=("online", "offline", "inprocess"), default="online")
    parser.add_argument("--rows-per-batch", type=int, default=50,
                        help="rows arriving per simulated second (default 50)")
    parser.add_argument("--batch-seconds", type=float, default=1.0)
    parser.add_argument("--speedup", type=float, default=1.0,
                        help="wall time per batch = batch-seconds / speedup (default 1: "
                             "~70 s per trace)")
    parser.add_argument("--retrain-interval", type=float, default=2.0,
                        help="LATENCY_RETRAINING_INTERVAL_SEC of the servers started (wall s)")
    parser.add_argument("--warmup-batches", type=int, default=2)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--max-seconds", type=float, default=600.0,
                        help="wall-time cap of one trace's replay (default 600)")
    parser.add_argument("--model-type", choices=[m.value for m in ModelType])
    parser.add_argument("--objective", choices=[o.value for o in ObjectiveType])
    parser.add_argument("--calibration", choices=[c.value for c in Calibration],
                        help="LATENCY_CALIBRATION of the servers (default: theirs, adaptive)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=1, help="offline: average over N seeds")
    parser.add_argument("--training-url")
    parser.add_argument("--prediction-url")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument("--dump-rows", metavar="PATH",
                        help="online: append every scored row (actual, served, naive) "
                             "as JSON lines")
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if bool(args.training_url) != bool(args.prediction_url):
        parser.error("--training-url and --prediction-url go together")
    if args.training_url and (not args.trace or len(args.trace) != 1):
        parser.error("with running servers give exactly one --trace (they keep what they hold)")
    for name in ("rows_per_batch", "windows", "seeds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.speedup <= 0 or args.batch_seconds <= 0 or args.retrain_interval <= 0:
        parser.error("--speedup, --batch-seconds and --retrain-interval must be positive")
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    overrides: dict[str, Any] = {}
    if args.model_type:
        overrides["model_type"] = args.model_type
    if args.objective:
        overrides["objective_type"] = args.objective
    if args.calibration:
        overrides["calibration"] = args.calibration
    settings = TrainingSettings(**overrides)  # environment, then the flags
    quantile = settings.quantile_alpha
    traces = [load_rows(spec) for spec in (args.trace or DEFAULT_TRACES)]
    results = []
    for name, rows in traces:
        if args.mode == "online":
            result = run_online(name, rows, args, quantile)
            if not args.json:
                print_online(result, args)
        elif args.mode == "inprocess":
            result = run_inprocess(name, rows, args, settings)
            if not args.json:
                print_inprocess(result, args)
        else:
            result = run_offline(name, rows, args, settings)
            if not args.json:
                print_offline(result)
        results.append(result)
    if args.json:
        config = {k: v for k, v in vars(args).items() if k not in ("json", "no_progress")}
        say(json.dumps({
            "mode": args.mode, "quantile": quantile, "code": git_state(),
            "model_type": settings.model_type.value, "objective": settings.objective_type.value,
            "calibration": settings.calibration.value,
            "config": config, "traces": results,
        }, indent=2))


if __name__ == "__main__":
    main()
