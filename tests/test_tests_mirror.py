"""The tests mirror the source: a test of `pkg/sub/mod.py` lives in `tests/pkg/sub/`, so the
tests of a module are found where the module is. Checked both ways on the folders: every
test folder names a source folder (or is one of the cross-cutting suites), and every source
subpackage has its test folder (unless it is tested only through another, as named below).
Benchmark packages may have test folders of their own (tests/benchmarks/replay: the replay's
pure pieces) but need not: a benchmark is checked by running it.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# Suites about the whole system rather than one package.
CROSS_CUTTING = {"e2e", "faults", "fuzz", "k8s"}
# Subpackages without a test folder of their own, and where they are tested instead.
TESTED_ELSEWHERE = {
    "shared/web": "through both servers (tests/training_server, tests/prediction_server)",
    "migrations/versions": "tests/migrations, one revision at a time",
}


def folders_with_tests(root: Path) -> set[str]:
    """Folders under `root` holding tests, relative to it."""
    return {
        str(p.parent.relative_to(root))
        for p in root.rglob("test_*.py")
        if p.parent != root and "__pycache__" not in p.parts
    }


def source_packages() -> set[str]:
    """Every package folder of the source tree (with an __init__.py), relative to the root."""
    return {
        str(p.parent.relative_to(ROOT))
        for p in ROOT.glob("*/**/__init__.py")
        if not p.relative_to(ROOT).parts[0].startswith((".", "tests", "benchmarks"))
    }


def benchmark_packages() -> set[str]:
    """The benchmarks' package folders, relative to the root."""
    return {str(p.parent.relative_to(ROOT)) for p in (ROOT / "benchmarks").rglob("__init__.py")}


def test_every_test_folder_mirrors_a_source_folder() -> None:
    mirrored = source_packages() | benchmark_packages()
    stray = {
        folder
        for folder in folders_with_tests(TESTS)
        if folder.split("/")[0] not in CROSS_CUTTING and folder not in mirrored
    }
    assert stray == set()


def test_every_source_subpackage_has_its_test_folder() -> None:
    tested = folders_with_tests(TESTS)
    subpackages = {p for p in source_packages() if "/" in p}
    missing = subpackages - tested - set(TESTED_ELSEWHERE)
    assert missing == set()
