"""The house rules of `shared`, checked on the source: it imports neither server and, but
for its web subpackage, no web framework; and importing one small module stays cheap.
(The rules of the whole tree, packages and modules, are tests/test_layering.py.)"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SERVERS = ("training_server", "prediction_server", "latency_cli")
WEB = ("fastapi", "starlette", "uvicorn")


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def top_level(names: set[str]) -> set[str]:
    return {name.split(".")[0] for name in names}


def test_shared_imports_no_server_and_only_its_web_layer_a_web_framework() -> None:
    offenders = []
    for path in sorted((ROOT / "shared").rglob("*.py")):
        found = top_level(imported_modules(path))
        banned = set(SERVERS) | (set() if "web" in path.relative_to(ROOT).parts else set(WEB))
        if found & banned:
            offenders.append(f"{path.relative_to(ROOT)}: {sorted(found & banned)}")
    assert offenders == []


def test_the_check_sees_an_offender(tmp_path: Path) -> None:
    """The walk above would catch a late import inside a function too."""
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from fastapi import APIRouter\n    import training_server\n")
    assert top_level(imported_modules(module)) == {"fastapi", "training_server"}


def test_no_benchmark_imports_a_test_module() -> None:
    offenders = [
        str(p.relative_to(ROOT))
        for p in sorted((ROOT / "benchmarks").rglob("*.py"))
        if "tests" in top_level(imported_modules(p))
    ]
    assert offenders == []


def test_importing_a_small_module_loads_no_heavy_library() -> None:
    probe = (
        "import sys, shared.targets; "
        "print(sorted(m for m in ('numpy', 'msgspec', 'pydantic') if m in sys.modules))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert done.stdout.strip() == "[]"
