"""The README's Layout table names every module of every package, and only modules that
exist: a newcomer reads it to find where a job lives."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROW = re.compile(r"^\| `(?P<path>[a-z_/]+/)` \| (?P<cell>.*) \|$")
NAME = re.compile(r"`([a-z_][a-z0-9_]*(?:\.py|\.c)?/?)`")


def layout_rows(readme: str) -> dict[str, set[str]]:
    """Package folder -> the module names its row of the Layout table cites."""
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, set[str]] = {}
    for line in section.splitlines():
        if match := ROW.match(line.strip()):
            rows[match["path"]] = {n.removesuffix(".py") for n in NAME.findall(match["cell"])}
    return rows


def modules_of(folder: Path) -> set[str]:
    """A package's own modules and subpackages (what a reader must find in the table)."""
    names = {p.stem for p in folder.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    names |= {f"{d.name}/" for d in folder.iterdir() if d.is_dir() and any(d.glob("*.py"))}
    names |= {p.name for p in folder.glob("*.c")}
    return names


# Rows that describe a folder as a whole, not module by module.
WHOLE_FOLDERS = ("tests/", "benchmarks/")


def packages(rows: dict[str, set[str]]) -> list[str]:
    return [
        path
        for path in rows
        if (ROOT / path / "__init__.py").is_file() and not path.startswith(WHOLE_FOLDERS)
    ]


def readme_rows() -> dict[str, set[str]]:
    return layout_rows((ROOT / "README.md").read_text())


def test_every_package_has_a_row() -> None:
    rows = readme_rows()
    top = {p.parent.name + "/" for p in ROOT.glob("*/__init__.py")} - set(WHOLE_FOLDERS)
    assert top - set(rows) == set()


def test_every_module_is_named_in_its_row_and_every_name_exists() -> None:
    rows = readme_rows()
    missing, unknown = [], []
    for path in packages(rows):
        actual = modules_of(ROOT / path)
        # A subpackage with its own row is covered there.
        covered = {f"{p[len(path) :]}" for p in rows if p != path and p.startswith(path)}
        cited = rows[path] | covered
        missing += [f"{path}{m}" for m in sorted(actual - cited)]
        unknown += [f"{path}{m}" for m in sorted(rows[path] - actual)]
    assert missing == [], "modules the Layout table leaves out"
    assert unknown == [], "names in the Layout table that are not modules"


def test_the_parser_reads_a_row_and_sees_a_gap(tmp_path: Path) -> None:
    sample = (
        "x\n## Layout\n| path | what |\n|---|---|\n"
        "| `pkg/` | `a` (one), `b.py`, `sub/` |\n## Next\n"
    )
    assert layout_rows(sample) == {"pkg/": {"a", "b", "sub/"}}
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    for name in ("__init__.py", "a.py", "c.py", "sub/__init__.py"):
        (package / name).write_text("")
    assert modules_of(package) == {"a", "c", "sub/"}
