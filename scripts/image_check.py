"""The image run as llm-d's chart runs it, and every command of it (scripts/image-check).

    PYTHONPATH=. .venv/bin/python scripts/image_check.py IMAGE

From IMAGE, each in a container of its own (buildah, --isolation chroot, the host's network
on 127.0.0.1), as uid 10001 with only its volumes writable:
  1. a training server and a prediction server, started by the image's own command with the
     chart's environment and our values file (k8s/llm-d/values.yaml) over it, on the chart's
     volumes (/models, /server_models; the prediction server mirrors over HTTP);
  2. a trace ingested into a pool through its URL, until the prediction server answers
     from a trained version through /pools/<name>: the seconds from the first rows;
  3. `latency-predictor status` and `retrains` against those servers;
  4. every subcommand's --help;
  5. the servers stopped, `latency-predictor advise --db` on the trainer's store, its volume
     mounted read-only;
  6. no file written outside the volumes, in any of the containers.
Exits 1 naming the first check that failed.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import yaml

from benchmarks.trace_files import load_trace, prediction_rows, resample
from devkit.llm_d_chart import PREDICTION_CONFIG, TRAINING_CONFIG, chart_config
from devkit.processes import free_port
from latency_cli.commands import COMMANDS
from scripts.image_containers import CheckFailed, Container

ROOT = Path(__file__).resolve().parents[1]
UID = (10001, 10001)
POOL = "image-check"
TRAINED_WITHIN_S = 30.0  # the goal: a trained version served within 30 s of the first rows
ROWS_PER_POST, POSTS = 250, 8  # the EPP's 1 s batches, 2,000 rows of the sharegpt trace
TRACE_MINUTES = 20
# A short advice: one seed, two policies, a minute of simulated traffic.
ADVISE = [
    "--pods",
    "4",
    "--seeds",
    "0",
    "--policies",
    "token-load,latency-first",
    "--sim-seconds",
    "60",
    "--no-progress",
]


def say(message: str) -> None:
    print(f"image-check: {message}", flush=True)


def our_values(server: str) -> dict[str, str]:
    """The `config` our values file gives `server` (trainingServer | predictionServers)."""
    values = yaml.safe_load((ROOT / "k8s/llm-d/values.yaml").read_text())
    config = values["router"]["latencyPredictor"][server].get("config", {})
    return {str(k): str(v) for k, v in config.items()}


def volume(root: Path, name: str) -> Path:
    """An emptyDir: a folder only the image's user can write."""
    path = root / name
    path.mkdir(mode=0o755)
    os.chown(path, *UID)
    return path


def wait_ready(url: str, what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise CheckFailed(f"{what} not ready at {url} within {timeout:.0f} s")


def trace_rows() -> list[dict[str, object]]:
    """The trace's rows, stamped as if sent over the last TRACE_MINUTES (the advisor wants
    minutes of traffic, not one burst)."""
    rows = resample(load_trace("sharegpt-h200"), ROWS_PER_POST * POSTS, seed=1)
    start = datetime.now(UTC) - timedelta(minutes=TRACE_MINUTES)
    step = timedelta(minutes=TRACE_MINUTES) / len(rows)
    return [{**row, "timestamp": (start + i * step).isoformat()} for i, row in enumerate(rows)]


def trained_through_pool(trainer: str, predictor: str) -> float:
    """Ingest the trace into POOL through its URL, one batch a second, and ask the
    prediction server through its pool URL each second; the seconds from the first rows to
    the first answer from a trained version."""
    rows = trace_rows()
    asked = prediction_rows(rows[:3])
    first, trained = time.monotonic(), None
    for i in range(60):  # bounded: a minute at most
        if i < POSTS:
            batch = rows[i * ROWS_PER_POST : (i + 1) * ROWS_PER_POST]
            url = f"{trainer}/pools/{POOL}/add_training_data_bulk"
            sent = httpx.post(url, json={"entries": batch}, timeout=10.0)
            if sent.status_code != 202:
                raise CheckFailed(f"ingestion answered {sent.status_code}: {sent.text[:200]}")
        if trained is None:
            url = f"{predictor}/pools/{POOL}/predict/bulk/strict"
            answer = httpx.post(url, json={"requests": asked}, timeout=10.0)
            version = answer.json().get("model_version") if answer.status_code == 200 else None
            if version and version != "cold-start-prior":
                trained = time.monotonic() - first
                say(
                    f"pool {POOL}: trained version {version} served {trained:.1f} s after the "
                    f"first rows, through {predictor}/pools/{POOL}"
                )
        if trained is not None and i >= POSTS - 1:
            return trained
        time.sleep(1.0)
    raise CheckFailed(f"no trained version served through /pools/{POOL} within 60 s")


def servers(root: Path, image: str) -> tuple[Container, Container, str, str]:
    """The trainer and a prediction server, started as the chart starts them."""
    t_port, p_port = free_port(), free_port()
    models, server_models = volume(root, "models"), volume(root, "server_models")
    trainer = Container(image, "training-server", {models: "/models"})
    trainer.start(
        {
            "POD_NAME": "epp-0",
            "SERVER_TYPE": "training",
            **chart_config(TRAINING_CONFIG, "/models"),
            **our_values("trainingServer"),
            "TRAINING_HOST": "127.0.0.1",
            "TRAINING_PORT": str(t_port),  # loopback only here
        }
    )
    predictor = Container(image, "prediction-server-1", {server_models: "/server_models"})
    predictor.start(
        {
            "POD_NAME": "epp-0",
            "SERVER_TYPE": "prediction-1",
            "PREDICT_PORT": str(p_port),
            "TRAINING_SERVER_URL": f"http://127.0.0.1:{t_port}",
            **chart_config(PREDICTION_CONFIG, "/server_models"),
            **our_values("predictionServers"),
            "PREDICT_HOST": "127.0.0.1",
        }
    )
    return trainer, predictor, f"http://127.0.0.1:{t_port}", f"http://127.0.0.1:{p_port}"


def commands(tools: Container, trainer: str, predictor: str) -> None:
    """status and retrains against the servers, and every subcommand's --help."""
    status = tools.run(
        [
            "latency-predictor",
            "status",
            "--training-url",
            trainer,
            "--prediction-url",
            predictor,
            "--pool",
            POOL,
            "--json",
        ]
    )
    report = json.loads(status.stdout)
    if report["training"]["state"] != "up" or not report["training"].get("model_version"):
        raise CheckFailed(f"status: {status.stdout[:300]}")
    retrains = tools.run(
        ["latency-predictor", "retrains", "--url", trainer, "--pool", POOL, "--json"]
    )
    if not json.loads(retrains.stdout):
        raise CheckFailed("retrains: none listed")
    say(f"status and retrains answered from the image (pool {POOL})")
    names = [*COMMANDS, "demo", "migrate", "retrains", "training-server", "prediction-server"]
    for name in names:
        tools.run(["latency-predictor", name, "--help"])
    say(f"--help of {len(names)} subcommands answered: {', '.join(names)}")


def main(image: str) -> int:
    root = Path(tempfile.mkdtemp(prefix="image-check-"))
    root.chmod(0o755)
    made: list[Container] = []
    try:
        trainer, predictor, t_url, p_url = servers(root, image)
        made += [trainer, predictor]
        wait_ready(t_url, "the training server")
        wait_ready(p_url, "the prediction server")
        elapsed = trained_through_pool(t_url, p_url)
        if elapsed > TRAINED_WITHIN_S:
            raise CheckFailed(f"trained version after {elapsed:.1f} s (goal {TRAINED_WITHIN_S})")
        tools = Container(image, "tools", {volume(root, "tmp"): "/tmp"})
        made.append(tools)
        commands(tools, t_url, p_url)
        trainer.stop()
        predictor.stop()
        store = root / "models" / "latency-predictor" / "latency.db"
        advisor = Container(
            image,
            "advisor",
            {volume(root, "advise-tmp"): "/tmp"},
            read_only={root / "models": "/models"},
        )
        made.append(advisor)
        started = time.monotonic()
        advice = advisor.run(
            [
                "latency-predictor",
                "advise",
                "--db",
                "sqlite:////models/latency-predictor/latency.db",
                *ADVISE,
            ]
        )
        lines = advice.stdout.splitlines()
        verdict = next((ln for ln in lines if ln.startswith("verdict")), "")
        if not verdict or "simulated" not in advice.stdout:
            raise CheckFailed(f"advise gave no simulated verdict: {advice.stdout[-400:]}")
        say(
            f"advise --db on the trainer's store ({store.stat().st_size:,} bytes, read-only): "
            f"{time.monotonic() - started:.0f} s, {' '.join(verdict.split())}"
        )
        for container in made:
            container.check_untouched()
        say(f"nothing written outside the volumes in {len(made)} containers")
        return 0
    except CheckFailed as exc:
        say(f"FAILED: {exc}")
        for container in made:
            container.print_log_tail()
        return 1
    finally:
        for container in made:
            container.remove()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: image_check.py IMAGE")
    sys.exit(main(sys.argv[1]))
