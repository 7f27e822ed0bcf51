"""The rows a replay sends: a trace by name or path, and which target a row measures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmarks.trace_files import TRACE_DIR, load_trace
from shared.targets import Target


def load_rows(spec: str) -> tuple[str, list[dict[str, Any]]]:
    """A trace name in TRACE_DIR, or a path to any file in the same JSON-lines format."""
    path = Path(spec)
    if path.suffix == ".jsonl" or path.is_file():
        with path.open() as fh:
            return path.stem, [json.loads(line) for line in fh if line.strip()]
    if not (TRACE_DIR / f"{spec}.jsonl").is_file():
        known = ", ".join(sorted(p.stem for p in TRACE_DIR.glob("*.jsonl")))
        raise SystemExit(f"no trace {spec!r} (known: {known}; or give a .jsonl path)")
    return spec, load_trace(spec)


def measures(row: dict[str, Any], target: Target) -> bool:
    return float(row.get(target.actual_field) or 0) > 0
