"""`latency-predictor retrains`: the last retrains of a training server, as a table or JSON."""

from __future__ import annotations

import json
from typing import Any

import httpx

from latency_cli.table import align

COLUMNS = (
    ("started_at", "started (UTC)", "{}"),
    ("status", "status", "{}"),
    ("duration_s", "secs", "{:.2f}"),
    ("ttft_train_samples", "ttft n", "{}"),
    ("ttft_mae", "ttft MAE", "{:.1f}"),
    ("ttft_pinball_loss", "ttft pinball", "{:.2f}"),
    ("ttft_coverage", "ttft cov", "{:.3f}"),
    ("ttft_live_coverage", "ttft live cov", "{:.3f}"),
    ("ttft_model_choice", "ttft model", "{}"),
    ("tpot_train_samples", "tpot n", "{}"),
    ("tpot_mae", "tpot MAE", "{:.2f}"),
    ("tpot_pinball_loss", "tpot pinball", "{:.3f}"),
    ("tpot_coverage", "tpot cov", "{:.3f}"),
    ("tpot_live_coverage", "tpot live cov", "{:.3f}"),
    ("tpot_model_choice", "tpot model", "{}"),
)


def _cell(row: dict[str, Any], key: str, fmt: str) -> str:
    value = row.get(key)
    if value is None:
        return "-"
    if key == "started_at":
        return str(value)[:19].replace("T", " ")
    return fmt.format(value)


def render(rows: list[dict[str, Any]]) -> str:
    table = [[label for _, label, _ in COLUMNS]]
    table += [[_cell(r, key, fmt) for key, _, fmt in COLUMNS] for r in rows]
    return align(table, right=range(len(COLUMNS)))


def show_retrains(url: str, limit: int, as_json: bool) -> int:
    """Print the table; returns the process exit code (1 with a clear message if down)."""
    try:
        reply = httpx.get(f"{url.rstrip('/')}/retrains", params={"limit": limit}, timeout=10)
        reply.raise_for_status()
    except httpx.HTTPError as exc:
        print(f"cannot read retrains from {url}: {exc}")
        return 1
    rows = reply.json()["retrains"]
    print(json.dumps(rows, indent=2) if as_json else render(rows))
    return 0
