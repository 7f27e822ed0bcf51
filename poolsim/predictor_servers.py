"""Our real training and prediction servers for one simulated run, as local processes.

A run started at `speedup` simulated seconds per wall second divides every time constant
of the feedback loop by it, so that the predictor sees the simulated traffic as it would
see the real one: the trainer retrains every LATENCY_RETRAINING_INTERVAL_SEC = 10 /
speedup s and updates its live calibration every 1 / speedup s; prediction servers look
for a new bundle every 1 / speedup s. The training store is SQLite in a temp folder, the
servers share a model folder there, made by `start()`; `stop()` ends each process by its
PID and removes the folder (the servers' logs are quoted in the error when one fails to start).

For a multimodal workload (`encoder=True`) the servers also get
LATENCY_ENABLE_ENCODER_FEATURES=true, so the TTFT model uses the rows' encoder sizes
whatever the caller's environment says. That is the trainer's default already; a text-only
run (both sizes 0 in every row, where the switch cannot matter to a tree, which never
splits on a column that is 0 in every row) leaves the environment as it was.
"""

from __future__ import annotations

import secrets
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from devkit.processes import ServerProcess, free_port

RETRAIN_INTERVAL_S = 10.0  # the trainer's default, in real (simulated) seconds
SYNC_INTERVAL_S = 1.0  # the prediction servers' model sync and the live calibration's
MIN_INTERVAL_S = 0.05  # below this the servers would spend their time polling


def scaled_env(folder: Path, speedup: float, encoder: bool = False) -> dict[str, str]:
    """The servers' environment for a run at `speedup` (`encoder`: requests with images)."""
    sync = max(MIN_INTERVAL_S, SYNC_INTERVAL_S / speedup)
    env = {
        "LATENCY_DB_URL": f"sqlite:///{folder / 'store.db'}",
        "LATENCY_MODEL_DIR": str(folder / "models"),
        "LATENCY_RETRAINING_INTERVAL_SEC": f"{RETRAIN_INTERVAL_S / speedup:g}",
        "LATENCY_CALIBRATION_INTERVAL_SEC": f"{sync:g}",
        "MODEL_SYNC_INTERVAL_SEC": f"{sync:g}",
        # Two cores hold the simulator too: one worker per prediction server, one
        # training thread; the EPP's prediction calls come one at a time here.
        "LATENCY_WORKERS": "1",
        "LATENCY_TRAIN_THREADS": "1",
    }
    if encoder:
        env["LATENCY_ENABLE_ENCODER_FEATURES"] = "true"
    return env


def new_folder() -> Path:
    """A fresh name for a run's folder, made by `LocalPredictor.start`: an object only
    built (to read its environment) leaves nothing in the temp folder."""
    return Path(tempfile.gettempdir()) / f"poolsim-{secrets.token_hex(6)}"


@dataclass
class LocalPredictor:
    """A training server and `predictors` prediction servers on 127.0.0.1."""

    speedup: float
    predictors: int = 1
    encoder: bool = False  # a multimodal workload: the encoder features on
    folder: Path = field(default_factory=new_folder)
    servers: list[ServerProcess] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return scaled_env(self.folder, self.speedup, self.encoder)

    @property
    def training_url(self) -> str:
        return self.servers[0].url

    @property
    def prediction_urls(self) -> list[str]:
        return [server.url for server in self.servers[1:]]

    @property
    def pids(self) -> list[int]:
        return [server.pid for server in self.servers if server.proc is not None]

    def start(self) -> LocalPredictor:
        self.folder.mkdir(mode=0o700)
        env = self.env
        self.servers = [
            ServerProcess("training_server", free_port(), env, self.folder / "training.log")
        ] + [
            ServerProcess("prediction_server", free_port(), env, self.folder / f"pred-{i}.log")
            for i in range(self.predictors)
        ]
        try:
            for server in self.servers:
                server.start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """End every server started here (SIGTERM by PID, SIGKILL after 15 s), then
        remove the folder with the store, the models and the logs."""
        for server in self.servers:
            server.stop()
        shutil.rmtree(self.folder, ignore_errors=True)
