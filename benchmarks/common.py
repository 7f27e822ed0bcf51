"""What the benchmark scripts share: output, CPU placement, per-process measurements, the
raw HTTP/1.1 exchange of the hot-path drivers, a progress bar and the code version.

Standard library only: bench_client imports it into a process that, like a router, must not
carry numpy, XGBoost or the servers.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
from pathlib import Path

CONTENT_LENGTH = re.compile(rb"(?i)content-length: *(\d+)")


# output ----------------------------------------------------------------------------------


def say(text: str = "") -> None:
    """One line of the report on stdout, flushed (the runs are long; logs show progress)."""
    print(text, flush=True)


def note(text: str) -> None:
    """A diagnostic on stderr, flushed, apart from the report."""
    print(text, file=sys.stderr, flush=True)


class Progress:
    """One "\\r" line on stderr."""

    def __init__(self, label: str, total: int, enabled: bool = True):
        self.label, self.total, self.enabled = label, max(total, 1), enabled
        self.started = time.monotonic()

    def update(self, done: int, extra: str = "") -> None:
        if not self.enabled:
            return
        width = 30
        filled = int(width * done / self.total)
        bar = "#" * filled + "." * (width - filled)
        sys.stderr.write(
            f"\r{self.label} [{bar}] {done}/{self.total} "
            f"{time.monotonic() - self.started:5.1f}s {extra:<40}"
        )
        sys.stderr.flush()

    def close(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()


def git_state() -> str:
    """The checkout's short commit, marked when tracked files have uncommitted changes."""
    root = Path(__file__).resolve().parents[1]

    def git(*cmd: str) -> str:
        return subprocess.run(
            ["git", *cmd], cwd=root, text=True, capture_output=True, timeout=10, check=False
        ).stdout.strip()

    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--untracked-files=no")
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" (uncommitted changes)" if dirty else "")


# CPU placement ---------------------------------------------------------------------------


def allowed_cpus() -> list[int]:
    """The CPUs this process may run on, in order."""
    return sorted(os.sched_getaffinity(0))


def split_cpus() -> tuple[list[int], list[int]]:
    """(the first allowed CPU, the others); on a one-CPU machine both are that CPU."""
    cpus = allowed_cpus()
    return cpus[:1], (cpus[1:] or cpus[:1])


def pin(pid: int, cpus: list[int]) -> None:
    """Every thread of process `pid` onto `cpus` (sched_setaffinity(pid) moves only its main
    thread; threads started before, such as a retrain loop or a thread pool, would roam)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        os.sched_setaffinity(int(task.name), cpus)


# per-process measurements ----------------------------------------------------------------


def rss_mb(pid: int) -> float:
    """Resident set size of a process now, in MB (nan once it has no memory left to read)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process (all its threads) from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def simulate_command(
    workload: str, seed: int, duration: float, policies: str, json_out: Path, *extra: str
) -> list[str]:
    """`latency-predictor simulate` as a subprocess's command line, quiet and writing its
    JSON to `json_out`; `extra` adds the benchmark's own options (pool shape, roles...)."""
    return [
        sys.executable,
        "-m",
        "latency_cli",
        "simulate",
        "--workload",
        workload,
        "--duration",
        f"{duration:g}",
        "--policies",
        policies,
        "--seed",
        str(seed),
        "--json",
        str(json_out),
        "--no-progress",
        *extra,
    ]


# raw HTTP/1.1 on a kept-alive connection -------------------------------------------------


def request_bytes(port: int, body: bytes) -> bytes:
    """A complete POST /predict/bulk/strict request of `body` to 127.0.0.1:`port`."""
    head = (
        f"POST /predict/bulk/strict HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def read_response(reader: asyncio.StreamReader) -> tuple[bytes, bytes]:
    """(head, body) of the next response on the connection."""
    head = await reader.readuntil(b"\r\n\r\n")
    length_field = CONTENT_LENGTH.search(head)
    assert length_field is not None, head
    body = await reader.readexactly(int(length_field.group(1)))
    return head, body
