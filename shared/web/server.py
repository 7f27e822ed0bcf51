"""Command-line start-up shared by both servers: --host/--port flags over settings, uvicorn."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable, Sequence
from typing import Any

import uvicorn
from pydantic import ValidationError

from shared.cpus import available_cpus

log = logging.getLogger(__name__)


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
    configure_logging(settings.log_level)
    for line in settings.startup_lines():  # what was derived, and from which variable
        log.info("%s", line)
    # Only a server that can rebuild its app in worker processes runs several.
    workers = _worker_count(settings.workers) if factory_path else 1
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
        options.update(
            ssl_certfile=str(settings.tls_cert_file), ssl_keyfile=str(settings.tls_key_file)
        )
    if factory_path and workers > 1:
        # uvicorn binds host/port in this process; each worker builds its own app and model.
        uvicorn.run(factory_path, factory=True, workers=workers, **options)
    else:
        uvicorn.run(create_app(settings), **options)


def configure_logging(level: str) -> None:
    """One format for every process of a server: worker processes (started by uvicorn with
    `spawn`) call this too, or their lines would lose level and time, and INFO would be lost."""
    logging.basicConfig(
        level=level.upper(), format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )


def _worker_count(configured: int) -> int:
    """The configured count (0: one per CPU of the quota); more than the quota is allowed,
    and said: each worker holds its own model and they share the CPUs."""
    cpus = available_cpus()
    if configured > cpus:
        log.warning(
            "%d workers for %d CPU(s) of this container's quota: each holds its own model "
            "(~100 MB) and they contend for the CPUs; size UVICORN_WORKERS or LATENCY_WORKERS "
            "to the CPU limit",
            configured,
            cpus,
        )
    return configured or cpus
