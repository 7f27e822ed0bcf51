"""Progress on stderr: poolsim's bar per simulated run on a terminal, else one line per
step (so a log shows where the time went without a line per 10 % of every run)."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from poolsim.progress import ProgressBar


class Progress:
    def __init__(self, enabled: bool = True, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.enabled = enabled
        self.tty = enabled and self.stream.isatty()
        self.started = time.perf_counter()
        self.total_runs = 0
        self.runs_done = 0

    def note(self, text: str) -> None:
        if self.enabled:
            elapsed = time.perf_counter() - self.started
            self.stream.write(f"advise [{elapsed:5.1f} s] {text}\n")
            self.stream.flush()

    def bar(self, label: str, total_s: float) -> ProgressBar | None:
        """The bar of the next run (None when not on a terminal)."""
        if not self.tty:
            return None
        return ProgressBar(f"{self.runs_done + 1}/{self.total_runs} {label}", total_s, self.stream)

    def finished(self, label: str, bar: ProgressBar | None, sim_s: float, wall_s: float) -> None:
        self.runs_done += 1
        if bar is not None:
            bar.close(sim_s)
        else:
            self.note(
                f"run {self.runs_done}/{self.total_runs} {label}: {sim_s:.0f} s simulated in "
                f"{wall_s:.1f} s"
            )
