"""Our image in llm-d's router chart, as processes: one trainer and two prediction
containers started as the chart starts them (tests/e2e/chart_pod.py: the chart's env, the
image's ENV and default command, a directory of its own per volume), fed as the EPP feeds
them. Both prediction servers must serve each new version the trainer publishes within two
sync intervals, say so in /readyz and /status, and write nothing outside their volumes.

Two changes to the chart's env, for a test on a shared 2-core machine:
UVICORN_WORKERS=2 (the chart's 28 would start 28 processes) and MODEL_SYNC_INTERVAL_SEC=5
(the chart's 30 would make the test several times longer; the code path is the same). With
1 s and 2 s, publication-to-load took up to 2.5 s and 5.3 s at load averages of 7-10 from
other jobs, where the loader thread, at the lowest priority by design, waits for the CPU.
The trainer keeps the chart's 10 s retraining interval. Run as root, the test runs the pod
twice: as root, and as uid 10001 (the image's USER) with only the volumes writable.
"""

from __future__ import annotations

import itertools
import logging
import os
import random
import shutil
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row, synthetic_rows
from shared.settings import LLM_D_HOME
from tests.e2e.chart_pod import (
    Container,
    child_pids,
    files_under,
    prediction_container,
    rss_mb,
    stop_traced,
    traced,
    training_container,
    written_paths,
)
from tests.polling import eventually
from tests.unprivileged import python_for

log = logging.getLogger(__name__)
SYNC_SEC = 5.0
WORKERS = 2
PREDICTORS = 2
VERSIONS = 2  # new versions every prediction server must pick up
IMAGE_UID = (10001, 10001)  # the Containerfile's USER
WAIT_SEC = 200.0  # the trainer's retrains slow down a lot on a loaded machine


@dataclass
class Pod:
    trainer: ServerProcess
    predictors: list[ServerProcess]
    containers: list[Container]

    @property
    def training(self) -> Container:
        return self.containers[0]


@pytest.fixture(params=["as-test-user", "as-unprivileged-uid"])
def pod(request: pytest.FixtureRequest) -> Iterator[Pod]:
    run_as = None
    if request.param == "as-unprivileged-uid":
        if os.geteuid() != 0:
            pytest.skip("dropping to uid 10001 (the image's USER) needs root; run as root")
        run_as = IMAGE_UID
    root = Path(tempfile.mkdtemp(prefix="llm-d-pod-"))  # pytest's tmp_path is root's only
    root.chmod(0o755)
    trainer_port = free_port()
    containers = [training_container(root, trainer_port)]
    ports = [free_port() for _ in range(PREDICTORS)]
    for n, port in enumerate(ports, start=1):
        c = prediction_container(root, n, port, trainer_port)
        c.env.update(MODEL_SYNC_INTERVAL_SEC=str(SYNC_SEC), UVICORN_WORKERS=str(WORKERS))
        containers.append(c)
    for c in containers:
        c.make_dirs(run_as)
    python = python_for(run_as, root)
    processes = [
        c.process(port, run_as, python)
        for c, port in zip(containers, [trainer_port, *ports], strict=True)
    ]
    try:
        # The chart starts them together: prediction servers are ready with no trainer yet.
        for p in processes[1:]:
            p.start()
        processes[0].start()
        yield Pod(processes[0], processes[1:], containers)
    finally:
        for p in processes:
            p.stop()
        shutil.rmtree(root, ignore_errors=True)


@dataclass
class EppFeed:
    """The EPP's calls: a bulk of training rows every second, strict bulk predictions on a
    prediction server picked at random, in between. Bounded in count and time."""

    trainer: str
    predictors: list[str]
    stop: threading.Event = field(default_factory=threading.Event)
    ingest_codes: list[int] = field(default_factory=list)
    predictions: list[dict[str, Any]] = field(default_factory=list)

    def run(self) -> None:
        rng = random.Random(13)
        rows = [prediction_row(input_token_length=n) for n in (50, 500, 4000)]
        with httpx.Client(timeout=10) as client:
            for second in range(int(WAIT_SEC)):
                if self.stop.is_set():
                    return
                entries = {"entries": synthetic_rows(200, seed=second)}
                reply = client.post(f"{self.trainer}/add_training_data_bulk", json=entries)
                self.ingest_codes.append(reply.status_code)
                for _ in range(4):
                    url = rng.choice(self.predictors)
                    answer = client.post(f"{url}/predict/bulk/strict", json={"requests": rows})
                    self.predictions.append({"code": answer.status_code, **answer.json()})
                    if self.stop.wait(0.25):
                        return


@dataclass
class Observed:
    """The versions the trainer announced (/model/download/info, which the prediction
    servers poll), when it published each (CURRENT's mtime in its volume, written before it
    announces them), and what each worker of each prediction server said it serves, with
    when it loaded it."""

    announced: set[str] = field(default_factory=set)
    published: dict[str, float] = field(default_factory=dict)
    loaded: dict[str, dict[int, dict[str, float]]] = field(default_factory=dict)

    def note_trainer(self, models: Path, trainer_url: str) -> None:
        version = httpx.get(f"{trainer_url}/model/download/info", timeout=5).json()["model_version"]
        if version is not None:
            self.announced.add(version)
        try:
            with (models / "CURRENT").open() as fh:
                current, mtime = fh.read().strip(), os.fstat(fh.fileno()).st_mtime
        except FileNotFoundError:
            return
        self.published.setdefault(current, mtime)

    def note_status(self, name: str, status: dict[str, Any]) -> None:
        if status["last_model_load"] is None:
            return
        loaded_at = datetime.fromisoformat(status["last_model_load"]).timestamp()
        by_pid = self.loaded.setdefault(name, {}).setdefault(status["worker_pid"], {})
        by_pid.setdefault(status["model_version"], loaded_at)

    def all_workers_serve(self, version: str) -> bool:
        """Every worker of every server has served `version` or a newer one (early retrains
        may publish faster than a sync interval: a worker then goes straight to the newest,
        as it should). Versions are UTC timestamps: newer sorts later."""
        return len(self.loaded) == PREDICTORS and all(
            len(pids) == WORKERS and all(caught_up(loads, version) for loads in pids.values())
            for pids in self.loaded.values()
        )

    def delays(self, since: dict[str, float], versions: list[str]) -> dict[str, float]:
        """Seconds from `since` (a version's publication) until each worker served it or a
        newer version, per (server, worker, version) observed."""
        return {
            f"{name} pid {pid} {version}": round(
                min(t for v, t in loads.items() if v >= version) - since[version], 2
            )
            for name, pids in self.loaded.items()
            for pid, loads in pids.items()
            for version in versions
            if caught_up(loads, version) and version in since
        }


def caught_up(loads: dict[str, float], version: str) -> bool:
    return any(v >= version for v in loads)


def watch(pod: Pod) -> Observed:
    """Poll until every worker serves the VERSIONS-th version announced (bounded)."""
    seen = Observed()
    models = pod.training.volume / LLM_D_HOME / "models"

    def all_serve_the_versions() -> bool:
        seen.note_trainer(models, pod.trainer.url)
        for p in pod.predictors:
            seen.note_status(p.module, httpx.get(f"{p.url}/status", timeout=5).json())
        versions = sorted(seen.announced)
        return len(versions) >= VERSIONS and seen.all_workers_serve(versions[VERSIONS - 1])

    def observed_and_logs() -> str:
        logs = {c.name: (c.root / "server.log").read_text()[-1500:] for c in pod.containers}
        return f"{seen}\n{logs}"

    what = f"every worker serving {VERSIONS} new versions"
    eventually(all_serve_the_versions, WAIT_SEC, what, interval=0.1, detail=observed_and_logs)
    return seen


def serving_state(pod: Pod, converged: str) -> None:
    """/readyz and /status of every worker name the version all were seen serving, or a
    newer one the trainer announced since; the source is the trainer, over HTTP."""
    for p in pod.predictors:
        for _ in range(3 * WORKERS):  # fresh connections: each worker answers some
            ready = httpx.get(f"{p.url}/readyz", timeout=5)
            status = httpx.get(f"{p.url}/status", timeout=5).json()
            info = httpx.get(f"{pod.trainer.url}/model/download/info", timeout=5).json()
            assert ready.status_code == 200 and ready.json()["cold_start"] is False
            for served in (ready.json()["model_version"], status["model_version"]):
                assert converged <= served <= info["model_version"], (p.module, served)
            assert status["model_source"] == "trainer-sync", status
            assert "TRAINING_SERVER_URL" in status["model_source_reason"], status
            assert status["objective_type"] == "mean"  # the chart's LATENCY_OBJECTIVE_TYPE
            assert status["training_server_url"] == pod.trainer.url


def start_up_lines(pod: Pod) -> None:
    """What each server derived, logged once (not once per worker), with its source."""
    training, *predictions = pod.containers
    text = (training.root / "server.log").read_text()
    home = training.volume / LLM_D_HOME
    for line in (
        f"LATENCY_MODEL_DIR={home / 'models'} (derived from LATENCY_TTFT_MODEL_PATH=",
        f"LATENCY_DB_URL=sqlite:///{home / 'latency.db'} (derived from LATENCY_TTFT_MODEL_PATH=",
    ):
        assert text.count(line) == 1, (line, text[-3000:])
    for c in predictions:
        text = (c.root / "server.log").read_text()
        for line in (
            f"LATENCY_MODEL_DIR={c.volume / LLM_D_HOME / 'models'} (derived from "
            f"LOCAL_TTFT_MODEL_PATH={c.volume / 'ttft.joblib'})",
            f"LATENCY_WORKERS={WORKERS} (derived from UVICORN_WORKERS={WORKERS})",
            "model source: trainer-sync (no trainer-published CURRENT",
        ):
            assert text.count(line) == 1, (line, text[-3000:])


def footprint(pod: Pod) -> None:
    for p in (pod.trainer, *pod.predictors):
        workers = [f"{rss_mb(c):.0f}" for c in child_pids(p.pid)]
        log.info("%s RSS %.0f MB, children %s MB", p.module, rss_mb(p.pid), workers)


@pytest.mark.timeout(2 * WAIT_SEC)
def test_the_chart_runs_our_image_and_its_predictors_follow_the_trainer(pod: Pod) -> None:
    feed = EppFeed(pod.trainer.url, [p.url for p in pod.predictors])
    feeder = threading.Thread(target=feed.run)
    feeder.start()
    try:
        seen = watch(pod)
        versions = sorted(seen.announced)[:VERSIONS]
        serving_state(pod, versions[-1])
        footprint(pod)
    finally:
        feed.stop.set()
        feeder.join(30)
    start_up_lines(pod)

    # From the trainer's write of CURRENT: before it announces the version, so never late.
    delays = seen.delays(seen.published, versions)
    log.info("published -> loaded by each worker, s: %s", delays)
    assert max(delays.values()) <= 2 * SYNC_SEC, delays
    for name, pids in seen.loaded.items():
        assert all(caught_up(loads, v) for loads in pids.values() for v in versions), name
    assert set(feed.ingest_codes) == {202}
    assert {p["code"] for p in feed.predictions} == {200}
    answers = [row for p in feed.predictions for row in p["predictions"]]
    assert {row["objective_type"] for row in answers} == {"mean"}
    assert max(row["model_version"] for row in answers) >= versions[-1]

    for p in (pod.trainer, *pod.predictors):
        p.stop()
    for c in pod.containers:
        written = files_under(c.volume)
        log.info("%s wrote under its volume: %s", c.name, written)
        assert written and all(f.startswith(f"{LLM_D_HOME}/") for f in written), written
        assert list(c.tmp.iterdir()) == [] and list(c.cwd.iterdir()) == [], c.name


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to see every write")
def test_no_process_of_either_server_writes_outside_its_volume(tmp_path: Path) -> None:
    """Every process (uvicorn's workers and helpers, alembic, the model libraries) under
    strace, from start-up until a prediction server serves the trainer's first version: every
    path they create, open for writing, rename, remove or chmod is in their volume."""
    trainer_port, port = free_port(), free_port()
    training = training_container(tmp_path, trainer_port)
    prediction = prediction_container(tmp_path, 1, port, trainer_port)
    prediction.env.update(MODEL_SYNC_INTERVAL_SEC="1", UVICORN_WORKERS=str(WORKERS))
    servers = []
    for c, server_port in ((prediction, port), (training, trainer_port)):
        c.make_dirs(None)
        server = c.process(server_port, None, sys.executable)
        server.command = traced(server.command, c.root / "strace.log")
        servers.append(server)
    try:
        for server in servers:
            server.start(ready_timeout=120)
        batches = itertools.count()

        def fed_until_served() -> dict[str, Any] | None:  # a batch per poll, as the EPP
            rows = {"entries": synthetic_rows(200, seed=next(batches))}
            httpx.post(f"{servers[1].url}/add_training_data_bulk", json=rows, timeout=30)
            status: dict[str, Any] = httpx.get(f"{servers[0].url}/status", timeout=10).json()
            return status if status["model_version"] != "cold-start-prior" else None

        status = eventually(
            fed_until_served, WAIT_SEC, "the trainer's first version served", interval=0.5
        )
        assert status["model_source"] == "trainer-sync" and status["cold_start"] is False
    finally:
        for server in servers:
            stop_traced(server)
    for c in (training, prediction):
        written = written_paths((c.root / "strace.log").read_text())
        outside = sorted(p for p in written if not p.startswith(f"{c.volume}/"))
        log.info("%s: %d paths written, outside its volume: %s", c.name, len(written), outside)
        assert written and outside == [], c.name


def test_the_trace_check_sees_writes_and_ignores_reads() -> None:
    trace = "\n".join([
        '12 openat(AT_FDCWD, "/usr/lib/x.so", O_RDONLY|O_CLOEXEC) = 3',
        '12 openat(AT_FDCWD, "/tmp/.x.12.tmp", O_WRONLY|O_CREAT|O_TRUNC, 0666) = 4',
        '13 rename("/v/a.tmp", "/v/a") = 0',
        '13 mkdir("cache", 0777) = -1 EACCES (Permission denied)',
    ])  # fmt: skip
    assert written_paths(trace) == {"/tmp/.x.12.tmp", "/v/a.tmp", "/v/a", "cache"}
