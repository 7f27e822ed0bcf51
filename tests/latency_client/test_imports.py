"""latency_client is what a router installs: it must not pull in the servers or their stack,
and everything outside it goes through its front door (`latency_client/__init__.py`)."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import latency_client

ROOT = Path(__file__).resolve().parents[2]
# The package itself and its own tests may reach its private modules.
INSIDE = (("latency_client",), ("tests", "latency_client"))

FORBIDDEN = (
    "training_server",
    "prediction_server",
    "shared",
    "fastapi",
    "uvicorn",
    "pydantic",
    "numpy",
    "xgboost",
    "lightgbm",
    "sqlalchemy",
)


def test_importing_latency_client_loads_no_server_module() -> None:
    code = (
        "import json, sys, latency_client; "
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    loaded = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=60
        ).stdout
    )
    assert not set(FORBIDDEN) & set(loaded)
    assert {"httpx", "orjson"} <= set(loaded)


def test_the_front_door_lists_every_public_name_it_has() -> None:
    public = {n for n in vars(latency_client) if not n.startswith("_")} - {"annotations"}
    assert public == set(latency_client.__all__)


def private_imports(source: str) -> list[tuple[int, str]]:
    """(line, module) of each import that goes past the front door: `import latency_client.X`,
    `from latency_client.X import ...`, `from latency_client import _x`."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names if a.name.startswith("latency_client.")]
            found += [(node.lineno, name) for name in names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module.startswith("latency_client."):
                found.append((node.lineno, node.module))
            elif node.module == "latency_client":
                hidden = [a.name for a in node.names if a.name.startswith("_")]
                found += [(node.lineno, f"latency_client.{name}") for name in hidden]
    return found


def python_files(root: Path) -> Iterator[Path]:
    """Every .py file under `root` but those of hidden folders (.venv, .git, caches)."""
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__")
        yield from (Path(folder) / f for f in sorted(files) if f.endswith(".py"))


def offenders(root: Path) -> list[str]:
    out = []
    for path in python_files(root):
        relative = path.relative_to(root)
        if any(relative.parts[: len(inside)] == inside for inside in INSIDE):
            continue
        out += [f"{relative}:{line}: {name}" for line, name in private_imports(path.read_text())]
    return out


def test_nothing_outside_the_package_imports_past_its_front_door() -> None:
    assert offenders(ROOT) == []


def test_the_walk_sees_an_offender(tmp_path: Path) -> None:
    def write(relative: str, text: str) -> None:
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    private = "from latency_client._picker import admit\n"
    write(
        "poolsim/bad.py",
        "from latency_client import PodState, pick\n"  # the front door: fine
        "import latency_client.picker\n"
        "def f():\n"
        "    from latency_client._types import Row\n"  # late imports count too
        "    from latency_client import _stats\n",
    )
    write("latency_client/_x.py", private)  # the package itself
    write("tests/latency_client/test_x.py", private)  # and its own tests
    write(".venv/lib/site.py", private)  # not the repository's code
    assert offenders(tmp_path) == [
        "poolsim/bad.py:2: latency_client.picker",
        "poolsim/bad.py:4: latency_client._types",
        "poolsim/bad.py:5: latency_client._stats",
    ]
