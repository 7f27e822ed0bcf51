"""How many CPUs this container may use: the cgroup CPU quota, not the node's core count.

Sizing workers from os.cpu_count() on a 28-core node with a 2-CPU limit starts 28 workers
that are throttled and, holding a model each, run out of memory.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_V2 = Path("/sys/fs/cgroup/cpu.max")
CGROUP_V1_QUOTA = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us")
CGROUP_V1_PERIOD = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except OSError:
        return None


def cgroup_cpu_limit(
    v2: Path = CGROUP_V2, v1_quota: Path = CGROUP_V1_QUOTA, v1_period: Path = CGROUP_V1_PERIOD
) -> float | None:
    """CPUs allowed by the quota (e.g. 1.5), or None when there is no quota."""
    text = _read(v2)
    if text:
        quota, _, period = text.partition(" ")
        if quota != "max" and period:
            return int(quota) / int(period)
        return None
    quota_text, period_text = _read(v1_quota), _read(v1_period)
    if quota_text and period_text and int(quota_text) > 0:
        return int(quota_text) / int(period_text)
    return None


def available_cpus(**paths: Path) -> int:
    """Whole CPUs to plan for: the quota rounded up, capped by the CPUs we may run on."""
    affinity = len(os.sched_getaffinity(0))
    limit = cgroup_cpu_limit(**paths)
    return affinity if limit is None else max(1, min(affinity, math.ceil(limit)))
