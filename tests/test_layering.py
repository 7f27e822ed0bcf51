"""The house's import rules, checked on the source of every shipped package (the packages
pyproject.toml ships, so a new one is covered the day it is added):

- packages import one another only downward: no cycle between packages;
- no module imports, directly or through others, a module that imports it back: the module
  graph of the whole tree has no cycle (late imports inside functions count too);
- inside the packages with subpackages, every module sits in one layer of LAYERS, listed
  from the bottom up, and imports only its own layer or lower ones. The table below is the
  map of those packages: where the data lives, what runs on it, what assembles it.
"""

from __future__ import annotations

import ast
import re
import tomllib
from fnmatch import fnmatch
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

LAYERS: dict[str, list[tuple[str, ...]]] = {
    "training_server": [
        # the store and what the servers keep in memory beside it
        ("tables", "db", "migrate", "sample_counts", "retrain_record", "store"),
        ("leadership", "pool_leases", "bundle_share", "metrics", "prediction_fleet"),
        ("legacy", "legacy.*"),  # llm-d's joblib files
        ("retrain", "retrain.*"),  # the retrain loop, by its steps
        ("pools",),  # the one table of pools, each with its retrainer
        ("deps", "model_downloads", "routes", "routes.*"),
        ("app", "__main__"),
    ],
    "prediction_server": [
        ("errors", "metrics", "mirror", "fleet_report", "pipeline", "watcher"),
        ("pools",),  # the one table of pools, each with its watcher
        ("deps", "routes", "routes.*"),
        ("app", "__main__"),
    ],
    "shared": [
        ("*",),  # the contract and the model code, no web framework
        ("web", "web.*"),
    ],
    "migrations": [("versions", "versions.*"), ("env",)],
}


def shipped_packages() -> list[str]:
    """The top-level packages pyproject.toml ships (its `packages.find` includes)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    includes = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({str(p).rstrip("*").rstrip(".") for p in includes})


def module_files() -> dict[str, Path]:
    """Every module of the shipped packages by dotted name (a package by its __init__)."""
    modules = {}
    for package in shipped_packages():
        for path in (ROOT / package).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def _known(name: str, modules: dict[str, Path]) -> str | None:
    """The module `name` is, or is inside of (an attribute of a module), if ours."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The first-party modules `module` imports anywhere in its file."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            # `from pkg import mod` imports the module; `from mod import name`, the module.
            names = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names
            ]
        found |= {k for n in names if (k := _known(n, modules)) is not None}
    return found - {module}


def module_graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every elementary cycle through its smallest node, each as the path that closes it."""
    found: list[list[str]] = []

    def walk(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                walk(nxt, [*path, nxt])

    for start in sorted(graph):
        walk(start, [start])
    return found


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """Which packages each package's modules import (itself left out)."""
    packages: dict[str, set[str]] = {}
    for module, imported in graph.items():
        top = module.split(".")[0]
        packages.setdefault(top, set()).update(m.split(".")[0] for m in imported)
    return {top: found - {top} for top, found in packages.items()}


def layer_of(package: str, module: str) -> int | None:
    """The index of the first layer of `package` naming `module` (its dotted name inside
    the package), None for the package's own __init__ and for an unplaced module."""
    inner = module.removeprefix(f"{package}.")
    if inner == package:
        return None
    for index, patterns in enumerate(LAYERS[package]):
        if any(fnmatch(inner, pattern) for pattern in patterns):
            return index
    return None


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Imports inside a layered package that reach a higher layer, and unplaced modules."""
    found = []
    for module, imported in sorted(graph.items()):
        package = module.split(".")[0]
        if package not in LAYERS or module == package:
            continue
        own = layer_of(package, module)
        if own is None:
            found.append(f"{module}: in no layer of LAYERS[{package!r}]")
            continue
        for target in sorted(imported):
            theirs = layer_of(package, target) if target.split(".")[0] == package else None
            if theirs is not None and theirs > own:
                found.append(f"{module} -> {target}")
    return found


def test_the_check_covers_every_shipped_package() -> None:
    shipped = shipped_packages()
    assert {"shared", "training_server", "prediction_server", "advisor"} <= set(shipped)
    assert set(package_graph(module_graph())) == set(shipped)


def test_packages_import_only_downward() -> None:
    assert cycles(package_graph(module_graph())) == []


def test_no_module_imports_one_that_imports_it_back() -> None:
    assert cycles(module_graph()) == []


def test_no_import_runs_up_a_layered_package() -> None:
    assert upward_imports(module_graph()) == []


README_ARROW = re.compile(r"^ (?P<package>[a-z_]+) +(──▶ (?P<imports>[a-z_, ]+)|\(none of ours\))")


def readme_arrows(readme: str) -> dict[str, set[str]]:
    """The package diagram of the README's Layout: package -> the packages it imports."""
    section = readme.split("\n## Layout\n", 1)[1].split("```", 2)[1]
    arrows = {}
    for line in section.splitlines():
        if match := README_ARROW.match(line):
            listed = match["imports"] or ""
            arrows[match["package"]] = {p.strip() for p in listed.split(",") if p.strip()}
    return arrows


def test_the_readme_diagram_shows_every_package_and_its_arrows() -> None:
    drawn = readme_arrows((ROOT / "README.md").read_text())
    assert drawn == package_graph(module_graph())


def test_the_checks_see_an_offender(tmp_path: Path) -> None:
    """A cycle of any length, a late import inside a function, and an upward import."""
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
    assert cycles({"a": {"b"}, "b": {"a"}}) == [["a", "b", "a"]]
    assert cycles({"a": {"b"}, "b": set()}) == []
    late = tmp_path / "m.py"
    late.write_text("def f():\n    from training_server.retrain import loop\n")
    modules = {"training_server.retrain.loop": late, "training_server.store": late}
    assert imports_of("training_server.store", late, modules) == {"training_server.retrain.loop"}
    graph = {"training_server.store": {"training_server.retrain.loop"}}
    assert upward_imports(graph) == ["training_server.store -> training_server.retrain.loop"]
    assert upward_imports({"training_server.newcomer": set()}) == [
        "training_server.newcomer: in no layer of LAYERS['training_server']"
    ]
