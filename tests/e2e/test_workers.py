"""A prediction server with several worker processes: every worker swaps to a new bundle."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx

from devkit.processes import ServerProcess, free_port
from tests.conftest import publish_trained_bundle
from tests.polling import eventually


def children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def test_each_worker_serves_the_newly_published_bundle(tmp_path: Path) -> None:
    models = tmp_path / "models"
    models.mkdir()
    first = publish_trained_bundle(models, seed=1, version="20260101T000000.000000Z")
    env = {
        "LATENCY_MODEL_DIR": str(models),
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "2",
    }
    server = ServerProcess("prediction_server", free_port(), env, tmp_path / "pred.log").start()
    try:
        assert server.proc is not None
        python_children = [
            c
            for c in children(server.proc.pid)
            if "spawn_main" in Path(f"/proc/{c}/cmdline").read_text()
        ]
        assert len(python_children) == 2
        second = publish_trained_bundle(models, seed=2, version="20260102T000000.000000Z")

        def both_workers_serve_the_second() -> list[dict[str, Any]] | None:
            # fresh connections, so the kernel spreads them over both workers
            seen = [httpx.get(f"{server.url}/status").json() for _ in range(20)]
            versions, pids = ({s[k] for s in seen} for k in ("model_version", "worker_pid"))
            return seen if versions == {second.version} and len(pids) == 2 else None

        seen = eventually(
            both_workers_serve_the_second, 30, f"both workers serving {second.version}"
        )
        assert {s["worker_pid"] for s in seen} == set(python_children)
        assert {s["model_version"] for s in seen} == {second.version}, seen
        assert first.version != second.version
    finally:
        server.stop()
