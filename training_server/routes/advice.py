"""GET /advice: the last answer of `latency-predictor advise`, for the dashboard.

`latency-predictor advise ... --json <path>` writes its answer atomically (advisor.report);
pointed at a pool's advice file (LATENCY_ADVICE_FILE, where {pool} names each pool's; by
default advice.json in the pool's model directory) it is served here as written, plus
`written_at` (the file's mtime). The file is read on every request: it is small, capped at
ADVICE_MAX_BYTES. No file answers 404 naming the path and the command that writes it; a
file that cannot be read, is too large, is not JSON or not a JSON object answers 503 saying
why. Never a 500.
"""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from shared.pools import DEFAULT_POOL
from shared.web.auth import Access, require
from shared.wire import json_bytes, rfc3339
from training_server.deps import PoolDep

router = APIRouter()

ADVICE_MAX_BYTES = 1024 * 1024  # an answer is ~20 KB; anything near this is not one

_TEXT = {"type": "string"}
_DETAIL = {"type": "object", "properties": {"detail": _TEXT}, "required": ["detail"]}
# What GET /advice answers, for the OpenAPI schema (and tests/fuzz, which holds it to it).
RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "The advice file's JSON object as written, plus `written_at` (its mtime)",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"written_at": {**_TEXT, "format": "date-time"}},
                    "required": ["written_at"],
                }
            }
        },
    },
    404: {
        "description": "No advice file yet: the path, and the command that writes it",
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"detail": _TEXT, "path": _TEXT, "command": _TEXT},
                    "required": ["detail", "path", "command"],
                }
            }
        },
    },
    503: {
        "description": "The advice file is unreadable, over 1 MB, not JSON or not an object",
        "content": {"application/json": {"schema": _DETAIL}},
    },
}


def advise_command(path: Path, pool: str = DEFAULT_POOL) -> str:
    which = "" if pool == DEFAULT_POOL else f" --pool {pool}"
    return f"latency-predictor advise --db URL --pods N{which} --json {path}"


class Unreadable(Exception):
    """The advice file exists but is no advice: the reason, for the 503."""


def _kind(value: object) -> str:
    return {list: "an array", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number"
    )


def read_advice(path: Path) -> dict[str, Any]:
    """The file's JSON object with `written_at`. FileNotFoundError when there is none,
    Unreadable when it is not advice."""
    try:
        with path.open("rb") as fh:
            # The mtime of the file read: advise replaces it whole, never in place.
            mtime = os.fstat(fh.fileno()).st_mtime
            data = fh.read(ADVICE_MAX_BYTES + 1)
    except FileNotFoundError:
        raise
    except OSError as exc:  # a directory, no permission, an I/O error
        raise Unreadable(exc.strerror or type(exc).__name__) from exc
    if len(data) > ADVICE_MAX_BYTES:
        raise Unreadable(f"larger than {ADVICE_MAX_BYTES:,} bytes")
    try:
        document = json.loads(data)
    except UnicodeDecodeError:
        raise Unreadable("not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise Unreadable(f"not valid JSON ({exc})") from None
    except RecursionError:
        raise Unreadable("not valid JSON (nested too deeply)") from None
    if not isinstance(document, dict):
        raise Unreadable(f"not a JSON object but {_kind(document)}")
    return {**document, "written_at": rfc3339(datetime.fromtimestamp(mtime, UTC))}


def advice_body(path: Path) -> bytes:
    """read_advice's object as the response body. json_bytes: NaN and infinities an older
    writer left become null, as JSON has them."""
    document = read_advice(path)
    try:
        return json_bytes(document)
    except (RecursionError, TypeError, ValueError):  # nested past what the encoders take
        raise Unreadable("nested too deeply to serve") from None


@router.get("/advice", dependencies=require(Access.DASHBOARD), responses=RESPONSES)
async def advice(pool: PoolDep) -> Response:
    """What `latency-predictor advise --json` last wrote to the pool's advice file, plus
    `written_at`; 404 while there is none, 503 when it is unreadable."""
    path = pool.settings.advice_path(pool.name).absolute()
    try:
        body = await run_in_threadpool(advice_body, path)
    except FileNotFoundError:
        command = advise_command(path, pool.name)
        return JSONResponse(
            {
                "detail": f"no advice file at {path}: `{command}` writes it",
                "path": str(path),
                "command": command,
            },
            status_code=404,
        )
    except Unreadable as exc:
        raise HTTPException(503, f"advice file unreadable: {exc} ({path})") from None
    return Response(body, media_type="application/json")
