"""`latency-predictor status`: the training server and every prediction server at a glance.

For each server: reachable or not, health, the model version it serves and its age; for the
prediction servers whether they lag the version the trainer publishes; for the trainer its
stored samples, its last retrain, its failure streak and whether it holds the leadership.
Exit code 0 when every server answered, 1 when any did not (what could be read is printed).
With --pool NAME every server is asked about that pool (its routes under /pools/NAME).
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import httpx

from latency_cli.calls import (
    PREDICTION_URL,
    TRAINING_URL,
    CliError,
    Unreachable,
    add_pool_argument,
    answered,
    call,
    client,
    http_url,
)
from latency_cli.table import align, duration
from shared.pools import pool_url
from shared.targets import TARGETS

TRAINING, PREDICTION = "training server", "prediction server"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--training-url",
        type=http_url,
        default=TRAINING_URL,
        metavar="URL",
        help=f"training server ({TRAINING_URL})",
    )
    parser.add_argument(
        "--prediction-url",
        type=url_list,
        action="extend",
        metavar="URL",
        help="a prediction server; repeat it, or separate URLs with commas as "
        f"in PREDICTION_SERVER_URL, for several replicas ({PREDICTION_URL})",
    )
    add_pool_argument(parser)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")


def url_list(value: str) -> list[str]:
    """argparse type: one URL or several separated by commas."""
    return [http_url(part.strip()) for part in value.split(",") if part.strip()]


def run(args: argparse.Namespace) -> int:
    urls = [pool_url(u, args.pool) for u in args.prediction_url or [PREDICTION_URL]]
    report = gather(pool_url(args.training_url, args.pool), urls)
    report["pool"] = args.pool
    print(json.dumps(report, indent=2) if args.json else render(report))
    return 0 if report["all_up"] else 1


def gather(training_url: str, prediction_urls: list[str]) -> dict[str, Any]:
    """Ask every server at once (each bounded by the HTTP timeout); compare their versions."""
    with ThreadPoolExecutor(max_workers=1 + len(prediction_urls)) as threads:
        trainer_job = threads.submit(_server, training_url, TRAINING, _read_trainer)
        predictors = list(
            threads.map(lambda u: _server(u, PREDICTION, _read_predictor), prediction_urls)
        )
        trainer = trainer_job.result()
    published = trainer.get("model_version") if trainer["state"] == "up" else None
    for p in predictors:
        p["lags_trainer"] = None
        if p["state"] == "up" and trainer["state"] == "up":
            # With nothing published yet the prior is all there is to serve: not behind.
            p["lags_trainer"] = published is not None and p["model_version"] != published
    return {
        "all_up": all(s["state"] == "up" for s in (trainer, *predictors)),
        "checked_at": _now().isoformat().replace("+00:00", "Z"),
        "training": trainer,
        "prediction": predictors,
    }


def _now() -> datetime:
    return datetime.now(UTC)


def _server(url: str, what: str, read: Any) -> dict[str, Any]:
    """state: "up" (every status route answered), "down" (no answer) or "error" (it answered,
    but not what a healthy server answers); `error` says what went wrong."""
    report: dict[str, Any] = {"url": url, "state": "up", "error": None}
    with client() as c:
        try:
            read(c, url, report)
        except Unreachable as exc:
            report.update(state="down", error=str(exc))
        except CliError as exc:
            report.update(state="error", error=str(exc))
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            report.update(
                state="error",
                error=f"the {what} at {url} answered something "
                f"unexpected: {type(exc).__name__}: {exc}",
            )
    return report


def _json(c: httpx.Client, url: str, path: str, what: str) -> dict[str, Any]:
    reply = call(c, "GET", url, path, what)
    if reply.status_code != 200:
        raise answered(reply, f"the {what} at {url}{path}")
    body: dict[str, Any] = reply.json()
    return body


def _age(created_at: str | None) -> float | None:
    if not created_at:
        return None
    created = datetime.fromisoformat(created_at)
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (_now() - created).total_seconds()


def _read_trainer(c: httpx.Client, url: str, report: dict[str, Any]) -> None:
    health = _json(c, url, "/healthz", TRAINING)
    report["health"] = health.get("status")
    ready = call(c, "GET", url, "/readyz", TRAINING)
    report["ready"] = ready.status_code == 200
    data = _json(c, url, "/data/status", TRAINING)
    version = data.get("model_version")
    report["model_version"] = version
    report["model_created_at"] = None
    if version is not None:
        manifest = call(c, "GET", url, "/model/manifest/download", TRAINING)
        if manifest.status_code == 200:
            report["model_created_at"] = manifest.json().get("created_at")
    report["model_age_seconds"] = _age(report["model_created_at"])
    report["samples"] = {
        split: {t.value: data[key][f"{t.value}_samples"] for t in TARGETS}
        for split, key in (("train", "training_data"), ("test", "test_data"))
    }
    report["last_retrain"] = _last_retrain(c, url, data.get("last_retrain_detail"))
    report["retrain_failures"] = data.get("retrain_failures")
    trainer = data.get("trainer") or {}
    report["leader"] = trainer.get("is_leader")
    report["trainer_id"] = trainer.get("id")
    if not report["ready"]:
        raise answered(ready, f"the {TRAINING} at {url}/readyz")


def _last_retrain(
    c: httpx.Client, url: str, last_ok: dict[str, Any] | None
) -> dict[str, Any] | None:
    """The newest attempt, failed ones included (GET /retrains); else the last success."""
    reply = call(c, "GET", url, "/retrains", TRAINING, params={"limit": 1})
    rows = reply.json().get("retrains") if reply.status_code == 200 else None
    row = rows[0] if rows else last_ok
    if row is None:
        return None
    keys = ("started_at", "status", "duration_s", "version", "error")
    return {k: row.get(k) for k in keys}


def _read_predictor(c: httpx.Client, url: str, report: dict[str, Any]) -> None:
    report["health"] = _json(c, url, "/healthz", PREDICTION).get("status")
    status = _json(c, url, "/status", PREDICTION)
    report["model_version"] = status.get("model_version")
    report["cold_start"] = status.get("cold_start")
    report["model_created_at"] = status.get("model_created_at")
    report["model_age_seconds"] = _age(report["model_created_at"])
    report["last_model_load"] = status.get("last_model_load")


def render(report: dict[str, Any]) -> str:
    trainer, predictors = report["training"], report["prediction"]
    rows = [["server", "url", "state", "health", "model version", "age", "vs trainer"]]
    rows.append(_row("training", trainer, "-"))
    for p in predictors:
        lag = {None: "-", True: "LAGS", False: "current"}[p.get("lags_trainer")]
        rows.append(_row("prediction", p, lag))
    lines = [align(rows), ""]
    if trainer.get("samples") is not None:
        lines.append(align(_trainer_details(trainer)))
    lines += [s["error"] for s in (trainer, *predictors) if s["error"]]
    return "\n".join(lines).rstrip()


def _row(kind: str, server: dict[str, Any], lag: str) -> list[str]:
    health = server.get("health") or "-"
    if server.get("ready") is False:
        health += ", not ready"
    version = server.get("model_version") or ("none yet" if server["state"] == "up" else "-")
    return [
        kind,
        server["url"],
        server["state"],
        health,
        version,
        duration(server.get("model_age_seconds")),
        lag,
    ]


def _trainer_details(trainer: dict[str, Any]) -> list[list[str]]:
    samples = trainer["samples"]
    counts = ", ".join(
        f"{t.value} {samples['train'][t.value]} train + {samples['test'][t.value]} test"
        for t in TARGETS
    )
    last = trainer.get("last_retrain")
    if last is None:
        retrain = "none yet"
    else:
        when = str(last["started_at"] or "?")[:19].replace("T", " ")
        retrain = f"{when} UTC, {last['status']}, {last['duration_s']:.2f} s"
        if last.get("error"):
            retrain += f": {last['error']}"
    failures = trainer.get("retrain_failures") or {}
    streak = f"{failures.get('consecutive', 0)} in a row, {failures.get('total', 0)} since start"
    leader = trainer.get("leader")
    role = "-" if leader is None else ("leader" if leader else "follower")
    if trainer.get("trainer_id"):
        role += f" ({trainer['trainer_id']})"
    return [
        ["samples", counts],
        ["last retrain", retrain],
        ["failed retrains", streak],
        ["leadership", role],
    ]
