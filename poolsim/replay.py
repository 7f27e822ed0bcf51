"""Replay a workload from a JSONL file: one request per line.

Fields: `arrival_s` (seconds, >= 0), `input_tokens` (>= 1), `output_tokens` (>= 1);
optional `prefix_group` (an integer or a string naming the shared prefix), `prefix_tokens`
(how many leading prompt tokens the group shares, 0..input_tokens; needs a group),
`slo_ttft_ms` and `slo_tpot_ms` (> 0). Other fields are ignored; blank lines are skipped.
A bad line raises ReplayError naming the file, the line and the field.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from poolsim.request import Request


class ReplayError(ValueError):
    pass


def _integer(row: dict[str, Any], name: str, low: int, default: int | None = None) -> int:
    value = row.get(name, default)
    if value is None:
        raise ValueError(f"field '{name}' is required")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"field '{name}' must be an integer >= {low}, got {value!r}")
    return value


def _number(row: dict[str, Any], name: str, positive: bool) -> float | None:
    value = row.get(name)
    if value is None:
        return None
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or value != value or value < 0 or (positive and value == 0):
        bound = "> 0" if positive else ">= 0"
        raise ValueError(f"field '{name}' must be a number {bound}, got {value!r}")
    return float(value)


def _group(row: dict[str, Any], groups: dict[str, int]) -> int | None:
    value = row.get("prefix_group")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError(f"field 'prefix_group' must be an integer or a string, got {value!r}")
    return groups.setdefault(str(value), len(groups))


def parse_line(text: str, request_id: int, groups: dict[str, int]) -> Request:
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON ({exc.msg})") from None
    if not isinstance(row, dict):
        raise ValueError("not a JSON object")
    arrival = _number(row, "arrival_s", positive=False)
    if arrival is None:
        raise ValueError("field 'arrival_s' is required")
    input_tokens = _integer(row, "input_tokens", 1)
    group = _group(row, groups)
    prefix = _integer(row, "prefix_tokens", 0, default=0)
    if prefix and group is None:
        raise ValueError("field 'prefix_tokens' needs a 'prefix_group'")
    if prefix > input_tokens:
        raise ValueError(f"field 'prefix_tokens' ({prefix}) exceeds input_tokens ({input_tokens})")
    return Request(
        id=request_id,
        arrival_s=arrival,
        input_tokens=input_tokens,
        output_tokens=_integer(row, "output_tokens", 1),
        prefix_group=group,
        prefix_tokens=prefix,
        slo_ttft_ms=_number(row, "slo_ttft_ms", positive=True),
        slo_tpot_ms=_number(row, "slo_tpot_ms", positive=True),
    )


def load_replay(path: Path) -> list[Request]:
    requests: list[Request] = []
    groups: dict[str, int] = {}
    with path.open(encoding="utf-8") as fh:
        for number, text in enumerate(fh, start=1):
            if not text.strip():
                continue
            try:
                requests.append(parse_line(text, len(requests), groups))
            except ValueError as exc:
                raise ReplayError(f"{path}:{number}: {exc}") from None
    if not requests:
        raise ReplayError(f"{path}: no requests")
    return requests
