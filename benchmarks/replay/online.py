"""The online protocol through real servers: the EPP's loop, batch by batch, in trace order.

Per batch: POST the rows (without actuals, with the EPP's prediction-time constants) to
/predict/bulk/strict, keep the predictions, then POST the same rows with their actuals and
our predictions to /add_training_data_bulk. Batch k leaves at k * batch_seconds / speedup
wall seconds; the servers retrain on their own clock. Each row is scored only for the
target it measures, against the running p90 of every actual of that target sent before
its batch (the naive predictor) and the p90 of the newest of them (metrics.recent_naive),
from batch --warmup-batches + 1 on; a drift replay's rows are also scored after the shift
(drift_metrics.py).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from benchmarks.common import Progress
from benchmarks.replay.drift import Shift
from benchmarks.replay.drift_metrics import summarize_drift
from benchmarks.replay.metrics import TargetRecords, recent_naive, summarize_online
from benchmarks.replay.rows import measures
from benchmarks.replay.servers import ServerPair, check_local, server_env
from benchmarks.trace_files import prediction_rows
from shared.prior import PRIOR_VERSION
from shared.targets import TARGETS, Target


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


class OnlineRun:
    """One trace's replay against running servers; `result()` once `run()` returned."""

    def __init__(
        self,
        name: str,
        rows: list[dict[str, Any]],
        training_url: str,
        prediction_url: str,
        args: argparse.Namespace,
        quantile: float,
        shift: Shift | None = None,
    ):
        self.name, self.rows, self.args, self.quantile = name, rows, args, quantile
        self.shift = shift
        self.training_url, self.prediction_url = training_url, prediction_url
        per = args.rows_per_batch
        self.batches = [rows[i : i + per] for i in range(0, len(rows), per)]
        self.records = {t: TargetRecords() for t in TARGETS}
        self.seen: dict[Target, list[float]] = {t: [] for t in TARGETS}
        self.versions: list[str] = []
        self.batch_versions: list[str] = []  # the version that answered each batch
        self.first_model_batch: int | None = None
        self.truncated = False
        self.sent = 0
        self.wall = 0.0
        self.retrains: list[dict[str, Any]] = []

    def run(self, progress: bool) -> None:
        step = self.args.batch_seconds / self.args.speedup
        bar = Progress(self.name, len(self.batches), progress)
        client = httpx.Client(timeout=30.0, trust_env=False)
        trained_of = TrainedTargets(client, self.prediction_url)
        started = time.monotonic()
        deadline = started + self.args.max_seconds
        try:
            for k, batch in enumerate(self.batches):
                due = started + k * step
                if max(time.monotonic(), due) > deadline:
                    self.truncated = True
                    break
                time.sleep(max(0.0, due - time.monotonic()))
                version = self._batch(client, trained_of, k, batch)
                bar.update(k + 1, f"model {version[-19:]}")
            self.wall = time.monotonic() - started
            self.retrains = client.get(
                f"{self.training_url}/retrains", params={"limit": 1000}
            ).json()["retrains"]
        finally:
            bar.close()
            client.close()
        self.guessed = sorted(trained_of.guessed)

    def _batch(
        self, client: httpx.Client, trained_of: TrainedTargets, k: int, batch: list[dict[str, Any]]
    ) -> str:
        naive = {
            t: (float(np.quantile(self.seen[t], self.quantile)) if self.seen[t] else None)
            for t in TARGETS
        }
        recent = {t: recent_naive(self.seen[t], self.quantile) for t in TARGETS if self.seen[t]}
        reply = client.post(
            f"{self.prediction_url}/predict/bulk/strict", json={"requests": prediction_rows(batch)}
        )
        if reply.status_code != 200:
            raise RuntimeError(f"predict answered {reply.status_code}: {reply.text[:500]}")
        body = reply.json()
        version = body["model_version"]
        self.batch_versions.append(version)
        if not self.versions or self.versions[-1] != version:
            self.versions.append(version)
        trained = trained_of.of(version)
        if self.first_model_batch is None and any(trained.values()):
            self.first_model_batch = k
        predictions = body["predictions"]
        base = k * self.args.rows_per_batch
        for offset, (row, pred) in enumerate(zip(batch, predictions, strict=True)):
            for t in TARGETS:
                naive_p90 = naive[t]
                if k < self.args.warmup_batches or not measures(row, t) or naive_p90 is None:
                    continue
                self.records[t].add(
                    base + offset,
                    float(row[t.actual_field]),
                    float(pred[f"{t.value}_ms"]),
                    naive_p90,
                    trained[t],
                    naive_recent=recent[t],
                    seconds=k * self.args.batch_seconds,
                )
        entries = [
            {**row, "predicted_ttft_ms": p["ttft_ms"], "predicted_tpot_ms": p["tpot_ms"]}
            for row, p in zip(batch, predictions, strict=True)
        ]
        ingest = client.post(
            f"{self.training_url}/add_training_data_bulk", json={"entries": entries}
        )
        if ingest.status_code != 202:
            raise RuntimeError(f"ingest answered {ingest.status_code}: {ingest.text[:500]}")
        for t in TARGETS:
            self.seen[t].extend(float(r[t.actual_field]) for r in batch if measures(r, t))
        self.sent += len(batch)
        return str(version)

    def dump(self, path: str) -> None:
        with open(path, "a") as fh:
            for t in TARGETS:
                r = self.records[t]
                rows = zip(
                    r.index,
                    r.seconds,
                    r.actual,
                    r.model,
                    r.naive,
                    r.naive_recent,
                    r.trained,
                    strict=True,
                )
                for i, at, a, m, n, recent, trained in rows:
                    fh.write(
                        json.dumps(
                            {
                                "trace": self.name,
                                "target": t.value,
                                "row": i,
                                "seconds": at,
                                "actual": a,
                                "served": m,
                                "naive": n,
                                "naive_recent": recent,
                                "trained": trained,
                                "version": self.batch_versions[i // self.args.rows_per_batch],
                            }
                        )
                        + "\n"
                    )

    def result(self) -> dict[str, Any]:
        args = self.args
        ok = [r for r in self.retrains if r.get("status") == "ok"]
        return {
            "trace": self.name,
            "rows": len(self.rows),
            "rows_sent": self.sent,
            "batches": len(self.batches),
            "truncated": self.truncated,
            "wall_seconds": self.wall,
            "rows_per_retrain_interval": args.rows_per_batch
            * args.retrain_interval
            * args.speedup
            / args.batch_seconds,
            "model_versions_served": len([v for v in self.versions if v != PRIOR_VERSION]),
            "first_model_batch": self.first_model_batch,
            "versions_assumed_trained": self.guessed,
            "retrains_ok": len(ok),
            "retrain_seconds_mean": (float(np.mean([r["duration_s"] for r in ok])) if ok else None),
            "model_choices": choices_of(ok),
            "targets": {t.value: self._summary(t) for t in TARGETS},
        }

    def _summary(self, target: Target) -> dict[str, Any]:
        """One target's figures; after the shift too in a drift replay (up to the clock of
        the last batch sent: a truncated run ends there)."""
        records, args = self.records[target], self.args
        summary = summarize_online(records, self.sent, args.windows, self.quantile)
        if self.shift is not None:
            end_s = math.ceil(self.sent / args.rows_per_batch) * args.batch_seconds
            summary["drift"] = summarize_drift(records, self.shift, end_s, self.quantile)
        return summary


def choices_of(retrains: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """How often each candidate won, per target, from the retrains table (when recorded)."""
    out: dict[str, dict[str, int]] = {}
    for t in TARGETS:
        counts: dict[str, int] = {}
        for row in retrains:
            choice = row.get(f"{t.value}_model_choice")
            if choice:
                counts[choice] = counts.get(choice, 0) + 1
        out[t.value] = counts
    return out


def run_online(
    name: str,
    rows: list[dict[str, Any]],
    args: argparse.Namespace,
    quantile: float,
    shift: Shift | None = None,
) -> dict[str, Any]:
    progress = not args.no_progress
    if args.training_url:
        run = OnlineRun(
            name,
            rows,
            check_local(args.training_url),
            check_local(args.prediction_url),
            args,
            quantile,
            shift,
        )
        run.run(progress)
    else:
        with (
            tempfile.TemporaryDirectory(prefix="replay-") as tmp,
            ServerPair(Path(tmp), server_env(Path(tmp), args)) as servers,
        ):
            run = OnlineRun(
                name, rows, servers.trainer.url, servers.predictor.url, args, quantile, shift
            )
            run.run(progress)
    if args.dump_rows:
        run.dump(args.dump_rows)
    return run.result()
