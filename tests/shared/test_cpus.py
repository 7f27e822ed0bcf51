"""Worker sizing reads the cgroup CPU quota (v2 and v1 files), never the node's cores."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from shared.cpus import available_cpus, cgroup_cpu_limit


def files(
    tmp_path: Path, v2: str | None = None, quota: str | None = None, period: str | None = None
) -> dict[str, Path]:
    paths = {
        "v2": tmp_path / "cpu.max",
        "v1_quota": tmp_path / "cfs_quota_us",
        "v1_period": tmp_path / "cfs_period_us",
    }
    for key, text in (("v2", v2), ("v1_quota", quota), ("v1_period", period)):
        if text is not None:
            paths[key].write_text(text + "\n")
    return paths


@pytest.mark.parametrize(
    ("v2", "quota", "period", "expected"),
    [
        ("200000 100000", None, None, 2.0),
        ("150000 100000", None, None, 1.5),
        ("max 100000", None, None, None),
        (None, "50000", "100000", 0.5),
        (None, "-1", "100000", None),
        (None, None, None, None),
    ],
)
def test_cgroup_cpu_limit(
    tmp_path: Path, v2: str | None, quota: str | None, period: str | None, expected: float | None
) -> None:
    assert cgroup_cpu_limit(**files(tmp_path, v2, quota, period)) == expected


def test_available_cpus_rounds_the_quota_up_and_never_exceeds_affinity(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    assert available_cpus(**files(tmp_path / "a", "50000 100000")) == 1
    assert available_cpus(**files(tmp_path / "b", f"{affinity * 100000 + 1} 100000")) == affinity
    assert available_cpus(**files(tmp_path / "c")) == affinity


@pytest.fixture(autouse=True)
def _dirs(tmp_path: Path) -> None:
    for name in ("a", "b", "c"):
        (tmp_path / name).mkdir()
