"""Command-line start-up shared by both servers: --host/--port flags over settings, uvicorn."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn


def serve(
    description: str,
    load_settings: Callable[[], Any],
    create_app: Callable[[Any], Any],
    argv: Sequence[str] | None = None,
) -> None:
    settings = load_settings()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=settings.host, help=f"bind address ({settings.host})")
    parser.add_argument("--port", type=int, default=settings.port, help=f"port ({settings.port})")
    args = parser.parse_args(argv)
    settings = settings.model_copy(update={"host": args.host, "port": args.port})
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    uvicorn.run(
        create_app(settings),
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,  # one line per hot-path call would cost more than the call
    )
