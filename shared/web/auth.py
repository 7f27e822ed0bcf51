"""Access control: an optional bearer token on admin routes, and optionally on the rest.

Threat model (README "Access control"): the servers sit inside the cluster next to the
gateway. The EPP sends no credentials, so its routes (predict, ingestion, status, model
info, metrics) stay open unless LATENCY_PROTECT_EPP_ROUTES is set. What can destroy data or
swap the model (flush, reload, retrain, bundle export and import) needs the token once one
is configured; probes never do. Without a token everything is open, as in the llm-d
service, and the server says so at start-up.
"""

from __future__ import annotations

import hmac
import logging
from enum import StrEnum
from typing import Any

from fastapi import Depends, HTTPException, Request

from shared.settings import CommonSettings
from shared.tokens import TokenSource

log = logging.getLogger(__name__)


class Access(StrEnum):
    ADMIN = "admin"  # always guarded when a token is configured
    EPP = "epp"  # guarded only with LATENCY_PROTECT_EPP_ROUTES
    DASHBOARD = "dashboard"  # guarded only with LATENCY_PROTECT_DASHBOARD


def presented_token(request: Request) -> str | None:
    header = request.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() == "bearer" and value:
        return value.strip()
    return request.headers.get("x-api-token")


def _guarded(access: Access, settings: CommonSettings) -> bool:
    if access is Access.EPP:
        return settings.protect_epp_routes
    if access is Access.DASHBOARD:
        return settings.protect_dashboard
    return True


def check(request: Request, access: Access) -> None:
    """Raise 401 unless `access` is open here or the request carries the token."""
    source: TokenSource = request.app.state.token_source
    if not source.configured or not _guarded(access, request.app.state.settings):
        return
    expected = source.current()
    given = presented_token(request)
    if not expected or given is None or not hmac.compare_digest(given.encode(), expected.encode()):
        raise HTTPException(
            401,
            "missing or invalid API token: send `Authorization: Bearer <token>` "
            "(LATENCY_API_TOKEN / LATENCY_API_TOKEN_FILE)",
            headers={"WWW-Authenticate": "Bearer"},
        )


def require(access: Access) -> list[Any]:
    """Route dependencies: `@router.post(..., dependencies=require(Access.ADMIN))`."""

    async def dependency(request: Request) -> None:  # async: no thread hop per request
        check(request, access)

    return [Depends(dependency)]


def install(app: object, settings: CommonSettings) -> None:
    """Attach the token source to an app and say at start-up what is open."""
    source = TokenSource(settings)
    app.state.token_source = source  # type: ignore[attr-defined]
    if not source.configured:
        log.warning("no LATENCY_API_TOKEN: admin routes (flush, reload, import...) are open")
    elif settings.protect_epp_routes:
        log.info("API token required on every route but the probes")
