"""llm-d's router chart's EPP pod, as processes: what the chart gives each predictor
container (docs/llm-d-chart.md) and what our image gives it (the Containerfile's
ENV and CMD, read from the file), with a directory of its own standing for each volume.

Each container gets three directories: `volume` (its emptyDir, /models or /server_models),
`tmp` (the image's HOME=/tmp, also TMPDIR) and `cwd` (the image's WORKDIR), so a test can
see what a server writes where.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from devkit.llm_d_chart import PREDICTION_CONFIG, TRAINING_CONFIG, chart_config
from devkit.processes import ServerProcess

CONTAINERFILE = Path(__file__).resolve().parents[2] / "Containerfile"


def _final_stage_instructions(name: str) -> list[str]:
    """The arguments of every `name` instruction of the Containerfile's last stage, with
    continuation lines joined and comments dropped."""
    lines = [ln for ln in CONTAINERFILE.read_text().splitlines() if not ln.lstrip().startswith("#")]
    joined = "\n".join(lines).replace("\\\n", " ")
    found: list[str] = []
    for line in joined.splitlines():
        keyword, _, args = line.strip().partition(" ")
        if keyword.upper() == "FROM":
            found = []  # a new stage starts
        elif keyword.upper() == name:
            found.append(args.strip())
    return found


def image_command(python: str = sys.executable) -> list[str]:
    """The image's CMD (exec form), run by `python` instead of the image's."""
    command = json.loads(_final_stage_instructions("CMD")[-1])
    assert command[0] == "python", command
    return [python, *command[1:]]


def image_env(inherited: dict[str, str] | None = None) -> dict[str, str]:
    """The image's ENV, in order (a later instruction wins), each `$NAME` in a value
    expanded as the build expands it: from the ENV before it, else from `inherited` (what
    the base image sets; by default a plain PATH)."""
    env: dict[str, str] = {}
    known = {"PATH": "/usr/bin:/bin"} if inherited is None else dict(inherited)
    for args in _final_stage_instructions("ENV"):
        for item in shlex.split(args):
            key, _, value = item.partition("=")
            value = re.sub(r"\$\{?(\w+)\}?", lambda m: {**known, **env}.get(m[1], ""), value)
            env[key] = value
    return env


@dataclass
class Container:
    name: str
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @property
    def volume(self) -> Path:
        return self.root / "volume"

    @property
    def tmp(self) -> Path:
        return self.root / "tmp"

    @property
    def cwd(self) -> Path:
        return self.root / "cwd"

    def make_dirs(self, volume_owner: tuple[int, int] | None) -> None:
        """The volume writable by `volume_owner` (uid, gid) when given; tmp and cwd then
        writable only by root, as in an image with a read-only root filesystem."""
        for path in (self.volume, self.tmp, self.cwd):
            path.mkdir(parents=True)
            path.chmod(0o755)
        self.root.chmod(0o755)
        if volume_owner is not None:
            os.chown(self.volume, *volume_owner)

    def process(self, port: int, run_as: tuple[int, int] | None, python: str) -> ServerProcess:
        image = image_env()
        assert image["HOME"] == "/tmp", "the image's HOME is what `tmp` stands for"
        base = {**image, "HOME": str(self.tmp), "TMPDIR": str(self.tmp)}
        return ServerProcess(
            self.name,
            port,
            self.env,
            self.root / "server.log",
            command=image_command(python),
            base_env=base,
            cwd=self.cwd,
            run_as=run_as,
        )


def training_container(root: Path, port: int) -> Container:
    c = Container("training-server", root / "training-server")
    c.env = {
        "POD_NAME": "epp-0",
        "SERVER_TYPE": "training",
        **chart_config(TRAINING_CONFIG, c.volume),
        # Not the chart's: it leaves the trainer on the image's 0.0.0.0:8000.
        "TRAINING_HOST": "127.0.0.1",
        "TRAINING_PORT": str(port),
    }
    return c


def prediction_container(root: Path, n: int, port: int, trainer_port: int) -> Container:
    c = Container(f"prediction-server-{n}", root / f"prediction-server-{n}")
    c.env = {
        "POD_NAME": "epp-0",
        "SERVER_TYPE": f"prediction-{n}",
        "PREDICT_PORT": str(port),
        "TRAINING_SERVER_URL": f"http://127.0.0.1:{trainer_port}",  # the chart: localhost
        **chart_config(PREDICTION_CONFIG, c.volume),
        "PREDICT_HOST": "127.0.0.1",  # the chart: 0.0.0.0; tests bind loopback only
    }
    return c


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*") if not p.is_dir())


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def child_pids(pid: int) -> list[int]:
    children = Path(f"/proc/{pid}/task/{pid}/children")
    return [int(c) for c in children.read_text().split()] if children.exists() else []


# Every call that can create, change or remove a file or directory.
WRITING_CALLS = (
    "openat,open,creat,mkdir,mkdirat,rename,renameat,renameat2,unlink,unlinkat,rmdir,"
    "link,linkat,symlink,symlinkat,truncate,chmod,fchmodat,chown,fchownat,mknod,mknodat"
)
_CALL = re.compile(r"^\d+\s+(\w+)\((.*)$")


def traced(command: list[str], trace: Path) -> list[str]:
    """`command` under strace, every process it starts included, logging WRITING_CALLS."""
    return ["strace", "-f", "-qq", "--seccomp-bpf", "-e", f"trace={WRITING_CALLS}",
            "-o", str(trace), *command]  # fmt: skip


def stop_traced(server: ServerProcess) -> None:
    """End a server started under `traced`: the server itself, strace's child, by its pid
    (stopping strace would only detach it), then strace, which exits with it."""
    if server.proc is not None and server.proc.poll() is None:
        for pid in child_pids(server.pid):
            os.kill(pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            server.proc.wait(30)
    server.stop()


def written_paths(trace: str) -> set[str]:
    """The paths an strace log shows written (opens only with a writing or creating flag),
    whether or not the call succeeded; relative paths as they were given."""
    paths = set()
    for line in trace.splitlines():
        match = _CALL.match(line)
        if match is None:
            continue
        call, args = match.groups()
        if call in ("open", "openat") and not re.search(r"O_WRONLY|O_RDWR|O_CREAT|O_TRUNC", args):
            continue
        paths.update(re.findall(r'"([^"]*)"', args))
    return paths
