"""The repository stands on its own: no tracked file points at a folder beside it, and no
code reaches above the repository root for files."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from benchmarks.trace_files import TRACE_DIR as BENCHMARK_TRACES
from poolsim.reconstruct import TRACE_DIR as CALIBRATION_TRACES
from poolsim.reconstruct import TRACES

ROOT = Path(__file__).resolve().parents[1]
# Spelled in two parts so that this file does not match itself.
SIBLING_FOLDER = "../" + "shared"
PARENTS_INDEX = re.compile(r"Path\(__file__\)\.resolve\(\)\.parents\[(\d+)\]")


def tracked_files() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.split(b"\0")
    return [ROOT / name.decode() for name in listed if name]


def text_of(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
        return None


def sibling_mentions(text: str) -> list[int]:
    """Line numbers of `text` that name the folder beside the repository."""
    return [
        number
        for number, line in enumerate(text.splitlines(), 1)
        if SIBLING_FOLDER in line or SIBLING_FOLDER.replace("/", "\\") in line
    ]


def climbs_above(path: Path, text: str, root: Path) -> list[int]:
    """The parents[N] indexes in `text` (the source of `path`) that reach above `root`."""
    return [
        int(m.group(1))
        for m in PARENTS_INDEX.finditer(text)
        if not path.resolve().parents[int(m.group(1))].is_relative_to(root)
    ]


def test_no_tracked_file_mentions_the_sibling_folder() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}:{number}"
        for path in tracked_files()
        if (text := text_of(path)) is not None
        for number in sibling_mentions(text)
    ]
    assert not offenders, "\n".join(offenders)


def test_no_code_climbs_above_the_repository_root() -> None:
    offenders = [
        f"{path.relative_to(ROOT)}: parents[{index}]"
        for path in tracked_files()
        if path.suffix == ".py" and (text := text_of(path)) is not None
        for index in climbs_above(path, text, ROOT)
    ]
    assert not offenders, "\n".join(offenders)


def test_the_checks_catch_an_offender(tmp_path: Path) -> None:
    root = tmp_path / "repo"
    module = root / "pkg" / "mod.py"
    module.parent.mkdir(parents=True)
    climbing = 'DATA = Path(__file__).resolve().parents[{}] / "data"'
    assert climbs_above(module, climbing.format(1), root) == []
    assert climbs_above(module, climbing.format(2), root) == [2]
    assert sibling_mentions("a\nsee " + SIBLING_FOLDER + "/spec/api.md") == [2]
    assert sibling_mentions("see docs/api.md") == []


def test_the_traces_ship_inside_the_repository() -> None:
    for folder in (BENCHMARK_TRACES, CALIBRATION_TRACES):
        assert folder.resolve().is_relative_to(ROOT)
        for name in TRACES:
            assert (folder / f"{name}.jsonl").is_file(), name
            assert (folder / f"{name}-spec.yaml").is_file(), name
    assert (BENCHMARK_TRACES / "README.md").is_file()
