"""CPU used by the servers a benchmark started, and by the benchmark itself, over a span:
read from /proc (Linux), so that a change's cost shows per process in one run."""

from __future__ import annotations

import os
import time
from collections.abc import Sequence

from benchmarks.common import cpu_seconds, say
from devkit.processes import ServerProcess

CpuReading = tuple[float, dict[str, float]]  # (monotonic clock, CPU seconds by process)


def cpu_times(servers: Sequence[ServerProcess]) -> CpuReading:
    """The clock, and the CPU seconds (user + system) of each server and of this process."""
    used = {f"{server.module} (PID {server.pid})": cpu_seconds(server.pid) for server in servers}
    mine = os.times()
    used["this benchmark (client, Service stand-in)"] = mine.user + mine.system
    return time.monotonic(), used


def steady_cpu(since: CpuReading, until: CpuReading, span: str = "steady") -> None:
    """Print each process's CPU between two readings, in seconds and in cores."""
    wall = until[0] - since[0]
    shares = ", ".join(
        f"{name} {until[1][name] - used:.1f} s ({(until[1][name] - used) / wall:.2f} cores)"
        for name, used in since[1].items()
    )
    say(f"CPU over the {span} {wall:.0f} s: {shares}")
