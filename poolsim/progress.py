"""A one-line progress bar on stderr (redrawn in place on a terminal, else every 10 %)."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class ProgressBar:
    def __init__(self, label: str, total_s: float, stream: TextIO | None = None) -> None:
        self.label, self.total = label, max(total_s, 1e-9)
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.start: float | None = None  # the first call: after a policy's servers started
        self.last_tenth = -1

    def __call__(self, sim_s: float) -> None:
        done = min(sim_s / self.total, 1.0)
        if self.start is None:
            self.start = time.perf_counter()
        wall = time.perf_counter() - self.start
        rate = sim_s / wall if wall > 0 else 0.0
        text = (
            f"{self.label:<16} [{'#' * int(done * 30):<30}] {done:4.0%}  "
            f"sim {sim_s:7.1f}/{self.total:.0f} s  wall {wall:6.1f} s  x{rate:,.0f}"
        )
        if self.tty:
            self.stream.write("\r" + text)
        elif int(done * 10) > self.last_tenth:
            self.last_tenth = int(done * 10)
            self.stream.write(text + "\n")
        self.stream.flush()

    def close(self, sim_s: float) -> None:
        self(sim_s)
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
