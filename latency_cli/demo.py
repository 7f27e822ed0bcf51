"""The local demo: training server (SQLite) + one prediction server sharing a model folder,
fed by a built-in synthetic load so retrains happen and predictions visibly change.

Bounded in time; it ends the two processes it started, by PID, when done or interrupted.
"""

from __future__ import annotations

import argparse
import os
import random
import time
from pathlib import Path

import httpx

from devkit.processes import ServerExited, ServerProcess
from devkit.synthetic import prediction_row, synthetic_row

SHORT = prediction_row(input_token_length=100)
LONG = prediction_row(input_token_length=8000, num_request_waiting=2)


def _say(text: str) -> None:
    print(text, flush=True)


def run_demo(args: argparse.Namespace) -> None:
    var = Path(args.var).resolve()
    var.mkdir(parents=True, exist_ok=True)
    env = {
        "LATENCY_DB_URL": f"sqlite:///{var / 'latency.db'}",
        "LATENCY_MODEL_DIR": str(var / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": os.environ.get("LATENCY_RETRAINING_INTERVAL_SEC", "10"),
    }
    servers = [
        ServerProcess("training_server", args.training_port, env, var / "training.log"),
        ServerProcess("prediction_server", args.prediction_port, env, var / "prediction.log"),
    ]
    try:
        for server in servers:
            server.start()
        train_url, pred_url = servers[0].url, servers[1].url
        _say(f"training server  {train_url}   (store {env['LATENCY_DB_URL']})")
        _say(f"prediction server {pred_url}   (models {env['LATENCY_MODEL_DIR']})")
        _say(f"feeding {args.rows_per_second} samples/s for {args.duration:.0f}s; Ctrl-C stops\n")
        _say(
            f"{'t(s)':>5} {'samples':>8} {'model version':>26} {'short TTFT':>11} "
            f"{'long TTFT':>10} {'TPOT':>7}"
        )
        _load(train_url, pred_url, args.duration, args.rows_per_second)
    except (ServerExited, TimeoutError) as exc:
        raise SystemExit(f"{exc}\n(logs in {var})") from None
    except KeyboardInterrupt:
        _say("interrupted")
    finally:
        for server in servers:
            server.stop()
    _say(f"\nstopped both servers; data and models stay in {var}")


def _load(train_url: str, pred_url: str, duration: float, rows_per_second: int) -> None:
    rng = random.Random(7)
    sent = 0
    version = None
    started = time.monotonic()
    with httpx.Client(timeout=10.0) as client:
        while (elapsed := time.monotonic() - started) < duration:
            batch = [synthetic_row(rng) for _ in range(rows_per_second)]
            reply = client.post(f"{train_url}/add_training_data_bulk", json={"entries": batch})
            if reply.status_code == 202:
                sent += len(batch)
            answer = client.post(
                f"{pred_url}/predict/bulk/strict", json={"requests": [SHORT, LONG]}
            ).json()
            short, long = answer["predictions"]
            if answer["model_version"] != version:
                version = answer["model_version"]
                _report_retrain(client, train_url, version)
            _say(
                f"{elapsed:5.0f} {sent:8d} {answer['model_version']:>26} "
                f"{short['ttft_ms']:9.0f}ms {long['ttft_ms']:8.0f}ms {short['tpot_ms']:5.1f}ms"
            )
            time.sleep(max(0.0, 1.0 - (time.monotonic() - started - elapsed)))


def _report_retrain(client: httpx.Client, train_url: str, version: str) -> None:
    """One line with the held-out metrics of the retrain that produced `version`."""
    for retrain in client.get(f"{train_url}/retrains", params={"limit": 5}).json()["retrains"]:
        if retrain["version"] == version:
            r = {k: v or 0 for k, v in retrain.items()}
            _say(
                f"      retrain {version}: {r['duration_s']:.2f}s; held-out "
                f"TTFT MAE {r['ttft_mae']:.0f}ms coverage {r['ttft_coverage']:.2f}; "
                f"TPOT MAE {r['tpot_mae']:.1f}ms coverage {r['tpot_coverage']:.2f}"
            )
