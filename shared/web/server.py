"""Command-line start-up shared by both servers: --host/--port flags over settings, uvicorn."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
from pydantic import ValidationError

from shared.cpus import available_cpus


def serve(
    description: str,
    load_settings: Callable[[], Any],
    create_app: Callable[[Any], Any],
    argv: Sequence[str] | None = None,
    *,
    factory_path: str | None = None,
) -> None:
    """Run one server. With `factory_path` (a "module:function" building the app from the
    environment) and settings.workers != 1 it runs one process per CPU of the quota."""
    try:
        settings = load_settings()
    except ValidationError as exc:  # one clear line per bad setting, not a traceback
        raise SystemExit(f"invalid settings: {exc}") from None
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default=settings.host, help=f"bind address ({settings.host})")
    parser.add_argument("--port", type=int, default=settings.port, help=f"port ({settings.port})")
    args = parser.parse_args(argv)
    settings = settings.model_copy(update={"host": args.host, "port": args.port})
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    # Only a server that can rebuild its app in worker processes runs several.
    workers = (settings.workers or available_cpus()) if factory_path else 1
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": settings.log_level,
        "access_log": False,  # one line per hot-path call would cost more than the call
        # Past this many connections/requests in progress uvicorn answers 503: bounded work.
        "limit_concurrency": settings.max_concurrency,
        "timeout_keep_alive": settings.keep_alive_timeout_sec,
    }
    if settings.tls_cert_file and settings.tls_key_file:  # both or neither: a validator
        options.update(ssl_certfile=str(settings.tls_cert_file),
                       ssl_keyfile=str(settings.tls_key_file))
    if factory_path and workers > 1:
        # uvicorn binds host/port in this process; each worker builds its own app and model.
        uvicorn.run(factory_path, factory=True, workers=workers, **options)
    else:
        uvicorn.run(create_app(settings), **options)
