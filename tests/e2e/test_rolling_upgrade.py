"""A rolling upgrade in either order, on real processes: a Deployment restarts its pods in
any order, so a trainer of this tree must feed prediction servers from before pod_class,
and a trainer from before it must feed this tree's prediction servers.

The previous code is the real one: `git archive` of the last commit before bundles named
`pod_class_code` (8f601cd^), run from its own directory with PYTHONPATH pointing at it, so
its processes import its packages and not this tree's (checked below). Each case is a real
trainer and real prediction servers on 127.0.0.1 sharing one model directory, retraining
every second. Rows with a pod_class make this tree's trainer name the feature: the old
server refuses that bundle and keeps its last one, while this tree's server serves it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import subprocess
import sys
import sysconfig
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row, synthetic_rows
from tests.e2e.cluster import served_everywhere
from tests.polling import eventually

ROOT = Path(__file__).resolve().parents[2]
BEFORE_POD_CLASS = "8f601cd^"  # the last commit whose bundles never name pod_class_code
WAIT_S = 40.0  # a retrain (1 s interval, 30 trees) and a poll; seconds in practice
NEW_FIELD = "needs_newer_server"  # in this tree's GET /status, not in the old one's
ROWS = 300


def _git(*args: str) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, timeout=60)
    except FileNotFoundError:
        pytest.fail("git is not installed: this test runs the code of a previous commit")


@pytest.fixture(scope="module")
def old_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The previous commit's files, extracted from `git archive` (no compiled C walk)."""
    found = _git("rev-parse", "--verify", f"{BEFORE_POD_CLASS}^{{commit}}")
    if found.returncode != 0:
        pytest.fail(
            f"commit {BEFORE_POD_CLASS} is not in the repository at {ROOT} (a shallow "
            f"clone? fetch its history): {found.stderr.decode(errors='replace').strip()}"
        )
    commit = found.stdout.decode().strip()
    tree = tmp_path_factory.mktemp(f"old-{commit[:8]}")
    archive = _git("archive", "--format=tar", commit)
    assert archive.returncode == 0, archive.stderr.decode(errors="replace")
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive.stdout, check=True, timeout=60)
    _build_c_walk(tree)
    return tree


def _build_c_walk(tree: Path) -> None:
    """Compile the old tree's own C walk beside its source, as its install would (about
    0.5 s). Without it the old shared.tree_eval would import this tree's build through the
    editable install's finder. Its setup.py cannot run: its pyproject.toml no longer passes
    today's setuptools. No compiler: the old code takes its numpy walk (checked below)."""
    compiler = shlex.split(sysconfig.get_config_var("CC") or "cc")
    out = tree / "shared" / f"_treewalk{sysconfig.get_config_var('EXT_SUFFIX')}"
    with contextlib.suppress(FileNotFoundError):
        subprocess.run(
            [
                *compiler,
                "-O3",
                "-shared",
                "-fPIC",
                f"-I{sysconfig.get_paths()['include']}",
                str(tree / "shared" / "_treewalk.c"),
                "-o",
                str(out),
            ],
            capture_output=True,
            timeout=120,
        )


def _where_imports_come_from(tree: Path) -> list[str]:
    """What a process started as the servers are (cwd and PYTHONPATH = `tree`) imports."""
    probe = (
        "import prediction_server, training_server, shared.tree_eval as t; "
        "print(prediction_server.__file__); print(training_server.__file__); "
        "print(t.__file__); print(getattr(t._treewalk, '__file__', t.__file__)); "
        "print(t.EVALUATOR)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tree,
        env={**os.environ, "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout.split()


def test_the_old_tree_is_what_its_processes_import(old_tree: Path) -> None:
    *files, evaluator = _where_imports_come_from(old_tree)
    outside = [f for f in files if not Path(f).is_relative_to(old_tree)]  # the C walk too
    assert not outside, f"the old servers would import code from outside {old_tree}: {outside}"
    built = list((old_tree / "shared").glob("_treewalk*.so"))
    assert evaluator == ("c" if built else "numpy")


def _settings(tmp_path: Path, name: str) -> dict[str, str]:
    return {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / f'{name}.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),  # shared by every server of a case
        "LATENCY_RETRAINING_INTERVAL_SEC": "1",
        "LATENCY_N_ESTIMATORS": "30",
        "MODEL_SYNC_INTERVAL_SEC": "0.2",
        "LATENCY_WORKERS": "1",
    }


def _server(module: str, tree: Path, env: dict[str, str], log: Path) -> ServerProcess:
    """`python -m <module>` run from `tree`, importing its packages first."""
    port = free_port()
    return ServerProcess(
        module,
        port,
        {**env, "PYTHONPATH": str(tree)},
        log,
        command=[sys.executable, "-m", module, "--host", "127.0.0.1", "--port", str(port)],
        cwd=tree,
    )


@contextmanager
def _running(*servers: ServerProcess) -> Iterator[None]:
    """Start `servers` in order; every one started is stopped (by its PID) after."""
    started: list[ServerProcess] = []
    try:
        for server in servers:
            started.append(server.start())
        yield
    finally:
        for server in started:
            server.stop()


def _status(server: ServerProcess) -> dict[str, Any]:
    status: dict[str, Any] = httpx.get(f"{server.url}/status", timeout=5).json()
    return status


def _ingest(trainer: ServerProcess, rows: list[dict[str, Any]]) -> None:
    sent = httpx.post(f"{trainer.url}/add_training_data_bulk", json={"entries": rows}, timeout=30)
    assert sent.status_code == 202, sent.text


def _answered_by(server: ServerProcess) -> str:
    body = {"requests": [prediction_row(), prediction_row(pod_class="b200")]}
    answer = httpx.post(f"{server.url}/predict/bulk/strict", json=body, timeout=10)
    assert answer.status_code == 200, answer.text
    version: str = answer.json()["model_version"]
    return version


def _listed_features(model_dir: Path, version: str) -> dict[str, list[str]]:
    manifest = json.loads((model_dir / "versions" / version / "manifest.json").read_text())
    return {t: entry["features"] for t, entry in manifest["targets"].items()}


def _logs(*servers: ServerProcess) -> str:
    return "\n".join(f"--- {s.log_path.name}\n{s.log_path.read_text()[-1500:]}" for s in servers)


def test_a_new_trainer_feeds_old_prediction_servers(old_tree: Path, tmp_path: Path) -> None:
    env = _settings(tmp_path, "new-trainer")
    trainer = _server("training_server", ROOT, env, tmp_path / "trainer.log")
    old = _server("prediction_server", old_tree, env, tmp_path / "old-predict.log")
    new = _server("prediction_server", ROOT, env, tmp_path / "new-predict.log")
    with _running(trainer, old, new):
        assert NEW_FIELD not in _status(old) and _status(new)[NEW_FIELD] is None

        # Rows as llm-d's EPP sends them (no pod_class): a bundle the old server loads.
        _ingest(trainer, synthetic_rows(ROWS, seed=1))
        first = eventually(
            lambda: served_everywhere(trainer.url, [old.url, new.url], ROWS),
            WAIT_S,
            "the new trainer's version served by the old and the new prediction server",
            detail=lambda: _logs(trainer, old, new),
        )
        features = _listed_features(tmp_path / "models", first)
        assert all("pod_class_code" not in names for names in features.values()), features
        assert _answered_by(old) == _answered_by(new) == first
        assert _status(old)["refused_versions"] == {}

        # Rows of a mixed-hardware pool: the bundle names the feature; only a new server
        # reads it, and the old one keeps serving its last bundle (not the prior).
        classed = [
            {**row, "pod_class": ("h200", "b200")[i % 2]}
            for i, row in enumerate(synthetic_rows(ROWS, seed=2))
        ]
        _ingest(trainer, classed)
        second = eventually(
            lambda: served_everywhere(trainer.url, [new.url], 2 * ROWS),
            WAIT_S,
            "the new trainer's classed version served by the new prediction server",
            detail=lambda: _logs(trainer, new),
        )
        assert second != first
        features = _listed_features(tmp_path / "models", second)
        assert all("pod_class_code" in names for names in features.values()), features
        refused = eventually(
            lambda: _status(old)["refused_versions"].get(second),
            WAIT_S,
            "the old prediction server refusing the classed bundle",
            detail=lambda: _logs(old),
        )
        assert "unknown" in refused and "pod_class_code" in refused
        assert _status(old)["model_version"] == first
        assert _answered_by(old) == first and _answered_by(new) == second
        assert _status(new)["refused_versions"] == {}


def test_an_old_trainer_feeds_new_prediction_servers(old_tree: Path, tmp_path: Path) -> None:
    env = _settings(tmp_path, "old-trainer")  # its own store: it migrates its own schema
    trainer = _server("training_server", old_tree, env, tmp_path / "old-trainer.log")
    new = _server("prediction_server", ROOT, env, tmp_path / "new-predict.log")
    with _running(trainer, new):
        _ingest(trainer, synthetic_rows(ROWS, seed=3))
        version = eventually(
            lambda: served_everywhere(trainer.url, [new.url], ROWS),
            WAIT_S,
            "the old trainer's version served by the new prediction server",
            detail=lambda: _logs(trainer, new),
        )
        status = _status(new)
        assert status["refused_versions"] == {} and status[NEW_FIELD] is None
        assert _answered_by(new) == version
        # The old trainer never names the class; the new server answers classed rows.
        features = _listed_features(tmp_path / "models", version)
        assert all("pod_class_code" not in names for names in features.values()), features
