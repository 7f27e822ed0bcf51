"""Each subcommand imports its own modules only when it runs: with one of the project's
packages missing, the subcommands that need it fail alone, in one line, and every other
subcommand (and the command's own --help) still works. Real processes, the package hidden
from the import system the way an image without it would lack it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from latency_cli.commands import COMMANDS

# Each subcommand and a package of ours it cannot run without.
NEEDS = {"simulate": "poolsim", "advise": "advisor"}


def cli(args: list[str], hidden: str | None = None) -> subprocess.CompletedProcess[str]:
    """`latency-predictor ARGS` in a new interpreter where the package `hidden` (and every
    module under it) cannot be imported."""
    hide = (
        f"import importlib.abc, sys\n"
        f"class Hide(importlib.abc.MetaPathFinder):\n"
        f"    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {hidden!r} or name.startswith({hidden!r} + '.'):\n"
        f"            raise ModuleNotFoundError(f'No module named {{name!r}}', name=name)\n"
        f"sys.meta_path.insert(0, Hide())\n"
        if hidden
        else ""
    )
    code = f"{hide}from latency_cli.main import main\nmain({args!r})\n"
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_subcommand_answers_help(name: str) -> None:
    done = cli([name, "--help"])
    assert done.returncode == 0, done.stderr
    assert COMMANDS[name].help.split()[0] in done.stdout


@pytest.mark.parametrize(("command", "package"), sorted(NEEDS.items()))
def test_a_missing_package_breaks_only_the_subcommand_that_needs_it(
    command: str, package: str
) -> None:
    broken = cli([command, "--help"], hidden=package)
    assert broken.returncode == 1
    (line,) = broken.stderr.strip().splitlines()
    assert line.startswith(f"latency-predictor {command}: ") and package in line
    for other in ("status", "predict", "pools"):
        assert cli([other, "--help"], hidden=package).returncode == 0
    top = cli(["--help"], hidden=package)
    assert top.returncode == 0 and command in top.stdout
