"""`predicted-latency` closed loop against our real servers on loopback: valid picks,
training rows back, retrains served, the composite fallback, and every process ended."""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest

from devkit.processes import free_port
from poolsim.engine import Engine, Progress, RunResult
from poolsim.hardware import H200
from poolsim.policy_api import PolicyOptions
from poolsim.predicted import PredictedLatencyPolicy, stored_rows
from poolsim.predictor_servers import LocalPredictor
from poolsim.workloads import generate
from tests.latency_client.cluster import running_cluster
from tests.polling import eventually

ROOT = Path(__file__).resolve().parents[2]


def expected_rows(result: RunResult) -> int:
    """One TTFT row per request, one TPOT row more for each with a second token."""
    return sum(1 + (done.tpot_ms is not None) for done in result.completions)


def run(
    policy: PredictedLatencyPolicy,
    workload: str,
    seconds: float,
    progress: Progress | None = None,
) -> RunResult:
    requests = generate(workload, 2, seconds, seed=5)
    engine = Engine(requests, 2, H200, policy, speedup=policy.options.speedup, progress=progress)
    result = asyncio.run(engine.run())
    assert not result.unfinished and len(result.completions) == len(requests)
    assert {done.pod for done in result.completions} <= {0, 1}
    return result


def test_own_servers_learn_from_the_loop_and_are_ended() -> None:
    policy = PredictedLatencyPolicy(PolicyOptions(seed=1, speedup=10.0))
    counts: list[int] = []

    def watch(sim_s: float) -> None:  # the trainer's /data/status, a few times a second
        if policy.local is not None and policy.local.servers[0].proc is not None:
            stored = stored_rows(policy.local.training_url)
            if stored is not None:
                counts.append(stored)

    result = run(policy, "chat", 30.0, progress=watch)
    summary = result.policy_summary
    # rows went back as they completed: the store grew during the run, not only at the end
    assert len(set(counts)) >= 3 and counts == sorted(counts) and counts[-1] > 0
    assert summary["feedback_sent"] == expected_rows(result)
    # at least once: a flush cancelled in flight at the end is sent again by the close
    assert summary["trainer_samples"] >= expected_rows(result)
    # retrains happened and a trained model routed requests before the end
    assert summary["model_versions_served"] >= 2
    assert summary["first_model_at_s"] < result.sim_end_s
    assert summary["routed_by_prior"] < len(result.completions)
    assert summary["fallbacks"] == 0 and "rule_composite" not in summary
    for target in ("ttft", "tpot"):
        assert summary[f"served_{target}_rows"] > 0
        assert 0.0 <= summary[f"served_{target}_coverage"] <= 1.0
        assert summary[f"served_{target}_pinball_ms"] >= 0.0
    # every process it started is gone, and so is its temp folder
    assert policy.local is not None
    for server in policy.local.servers:
        assert server.proc is not None and server.proc.returncode is not None
    assert not policy.local.folder.exists()


def test_a_local_predictor_makes_its_folder_only_when_started(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built to read its environment and never started, it leaves nothing behind (each
    such object left an empty poolsim-* folder in the temp folder)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    local = LocalPredictor(5.0, encoder=True)
    assert local.env["LATENCY_DB_URL"] == f"sqlite:///{local.folder / 'store.db'}"
    assert local.folder.parent == tmp_path
    assert list(tmp_path.iterdir()) == []


def test_a_predictor_at_given_urls_gets_rows_with_the_predictions_acted_on(
    tmp_path: Path,
) -> None:
    with running_cluster(tmp_path, predictors=1) as cluster:
        options = PolicyOptions(
            seed=2,
            speedup=10.0,
            training_url=cluster.trainer.url,
            prediction_urls=tuple(cluster.prediction_urls),
        )
        policy = PredictedLatencyPolicy(options)
        result = run(policy, "chat", 30.0)
        assert policy.local is None  # it started nothing
        assert (stored_rows(cluster.trainer.url) or 0) >= expected_rows(result)
        assert result.policy_summary["feedback_sent"] == expected_rows(result)
        retrains = httpx.get(f"{cluster.trainer.url}/retrains", timeout=10).json()["retrains"]
        # the trainer scored the served p90s: the rows carried predicted_ttft/tpot_ms
        assert any((r["ttft_live_rows"] or 0) > 0 for r in retrains)
        versions = result.policy_summary["model_versions_served"]
        assert versions >= 2 and result.policy_summary["routed_by_prior"] > 0
        assert all(
            server.proc is not None and server.proc.poll() is None
            for server in (cluster.trainer, *cluster.predictors)
        )  # its servers are left running


def test_with_the_predictor_down_every_pick_falls_back_to_the_composite_score() -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    options = PolicyOptions(seed=3, speedup=20.0, training_url=nowhere, prediction_urls=(nowhere,))
    policy = PredictedLatencyPolicy(options)
    result = run(policy, "mixed", 20.0)
    summary = result.policy_summary
    requests = len(result.completions)
    assert summary["fallbacks"] == requests and summary["rule_composite"] == requests
    assert summary["served_ttft_rows"] == 0 and "served_ttft_coverage" not in summary
    # nothing reached the trainer either: every row is counted as dropped, none lost silently
    assert summary["feedback_sent"] == 0
    assert summary["feedback_dropped"] == expected_rows(result)
    assert {done.pod for done in result.completions} == {0, 1}  # the composite spreads


def children_of(pid: int) -> list[int]:
    """PIDs whose parent is `pid` (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def answers(pid: int) -> bool:
    """Whether the server process `pid` (devkit.processes.ServerProcess: `--port N` on its
    command line) is ready."""
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    port = int(argv[argv.index(b"--port") + 1])
    return httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=2).status_code == 200


# The prediction server is started after the trainer is ready: SIGTERM as soon as it exists
# lands in the start-up, once both answer in the run. Either must end them.
@pytest.mark.parametrize("phase", ["start-up", "run"])
def test_sigterm_ends_the_run_and_every_server_it_started(phase: str) -> None:
    command = [sys.executable, "-m", "latency_cli", "simulate", "--workload", "chat"]
    command += ["--pods", "2", "--duration", "600", "--policies", "predicted-latency"]
    command += ["--speedup", "1", "--no-progress"]
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        eventually(lambda: len(children_of(proc.pid)) >= 2, 60, "the run's two servers started")
        servers = children_of(proc.pid)
        assert len(servers) == 2, "the trainer and one prediction server"
        if phase == "run":
            eventually(
                lambda: all(answers(pid) for pid in servers),
                60,
                "both servers ready: the run under way",
                retrying=(httpx.HTTPError,),
            )
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 143, err
    assert b"every server it started was stopped" in err
    for pid in servers:
        assert not Path(f"/proc/{pid}").exists(), f"server {pid} outlived the run"


def test_sigterm_ends_a_run_of_a_policy_without_a_predictor_promptly() -> None:
    # unpaced runs never wait on the loop by themselves; the engine yields to it a few times
    # a second so the signal handler runs within the policy's run, not after it
    command = [sys.executable, "-m", "latency_cli", "simulate", "--workload", "chat"]
    command += ["--pods", "8", "--duration", "600", "--policies", "oracle"]
    proc = subprocess.Popen(
        command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert proc.stderr is not None
        # the progress bar's first line (every 10 % off a terminal): the run is under way
        first = proc.stderr.readline()
        assert "oracle" in first, first
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - sent
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)
    assert proc.returncode == 143, err
    assert took < 10.0, f"SIGTERM took {took:.1f} s to end the run"
