"""The operator subcommands of `latency-predictor`, each named with the module that runs it.

A subcommand's module (and so its package: poolsim, advisor, ...) is imported only when that
subcommand runs, or its --help is asked. The command's own help and every other subcommand
then work in an installation that lacks a piece: the piece missing breaks only the
subcommand that needs it, with one line saying what is missing (MissingPiece).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Callable
from dataclasses import dataclass

AddArguments = Callable[[argparse.ArgumentParser], None]
Run = Callable[[argparse.Namespace], int]


class MissingPiece(Exception):
    """A subcommand whose module, or a library it needs, is not installed."""


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    # "module:function" of the argument declarations and of the run (exit code)
    add_arguments: str
    run: str

    def _load(self, target: str) -> Callable[..., object]:
        module, _, attribute = target.partition(":")
        try:
            loaded: Callable[..., object] = getattr(importlib.import_module(module), attribute)
        except ModuleNotFoundError as exc:
            missing = exc.name or module
            raise MissingPiece(
                f"not available here: the module {missing} is not installed"
            ) from exc
        return loaded

    def loaded(self) -> tuple[AddArguments, Run]:
        """(add_arguments, run), importing the subcommand's modules; MissingPiece when one
        is not there."""
        add, run = self._load(self.add_arguments), self._load(self.run)
        return add, run  # type: ignore[return-value]


COMMANDS = {
    c.name: c
    for c in (
        Command(
            "status",
            "health, model versions, samples and the last retrain of every server",
            "latency_cli.status:add_arguments",
            "latency_cli.status:run",
        ),
        Command(
            "pools",
            "the pools of a training server: model version, samples and last retrain of each",
            "latency_cli.pools:add_arguments",
            "latency_cli.pools:run",
        ),
        Command(
            "predict",
            "predict TTFT and TPOT for one request row",
            "latency_cli.predict:add_arguments",
            "latency_cli.predict:run",
        ),
        Command(
            "export",
            "download the training server's current model bundle (.tar.gz)",
            "latency_cli.bundle:add_export_arguments",
            "latency_cli.bundle:run_export",
        ),
        Command(
            "import",
            "publish a bundle archive on a training server or into a model directory",
            "latency_cli.bundle:add_import_arguments",
            "latency_cli.bundle:run_import",
        ),
        Command(
            "simulate",
            "simulate a pool of vLLM-like pods and compare routing policies on it",
            "poolsim.command_args:add_arguments",
            "poolsim.command:run",
        ),
        Command(
            "advise",
            "read a store's traffic and say whether predicted-latency routing would pay off",
            "advisor.command:add_arguments",
            "advisor.command:run",
        ),
    )
}
