"""Running our code as an unprivileged user from a test that runs as root."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

NOBODY = (65534, 65534)


def python_for(run_as: tuple[int, int] | None, workdir: Path) -> str:
    """An interpreter `run_as` may run that sees this environment's packages: this one when
    it can, else a venv of the system's python of the same version in `workdir` whose
    .pth adds our site-packages (a pyenv under /root is out of an unprivileged user's
    reach). Skips the test when there is none."""
    if run_as is None or _runs_as(sys.executable, run_as):
        return sys.executable
    system = Path(f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}")
    if not system.exists():
        pytest.skip(f"{sys.executable} is out of uid {run_as[0]}'s reach and {system} is missing")
    venv = workdir / "python"
    subprocess.run([str(system), "-m", "venv", "--without-pip", str(venv)], check=True)
    (Path(sysconfig.get_paths(vars={"base": str(venv)})["purelib"]) / "_ours.pth").write_text(
        f"import site; site.addsitedir({sysconfig.get_paths()['purelib']!r})\n"
    )
    python = str(venv / "bin" / "python")
    if not _runs_as(python, run_as):
        pytest.skip(f"neither {sys.executable} nor {system} runs our code as uid {run_as[0]}")
    return python


def _runs_as(python: str, run_as: tuple[int, int]) -> bool:
    probe = [python, "-c", "import latency_cli.serve, shared.tree_eval"]
    try:
        done = subprocess.run(
            probe,
            user=run_as[0],
            group=run_as[1],
            extra_groups=[],
            capture_output=True,
            timeout=120,
            check=False,
            cwd="/",
        )
    except PermissionError:
        return False
    return done.returncode == 0
