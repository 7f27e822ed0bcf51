"""GET /dashboard: one self-contained HTML page charting the retrain history live.

The page (training_server/dashboard.html, package data) fetches /retrains, /data/status
and /prediction_servers from this server every 5 s, and /advice (routes/advice.py) on load
and every 60 s; nothing is loaded from anywhere else. Those are the routes of one pool,
under its /pools/<name> prefix (the `default` pool's unprefixed), chosen in a selector
filled from GET /pools (routes/pools.py) and kept in the address as ?pool=<name>.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

from shared.web.auth import Access, require

router = APIRouter()

# The browser enforces what the page promises: its own inline code, fetches to this origin.
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
    "connect-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'none'"
)


@cache
def dashboard_html() -> str:
    return files("training_server").joinpath("dashboard.html").read_text(encoding="utf-8")


@router.get(
    "/dashboard",
    response_class=HTMLResponse,
    include_in_schema=False,
    dependencies=require(Access.DASHBOARD),
)
async def dashboard() -> HTMLResponse:
    return HTMLResponse(
        dashboard_html(),
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "Cache-Control": "no-cache",  # a new release's page, not yesterday's
        },
    )
