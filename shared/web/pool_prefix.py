"""PoolPrefix: every route of a server also answers under `/pools/<name>/`.

One pure ASGI layer, outermost: a path `/pools/<name>/rest` reaches the routes (and the
other middlewares: limits, auth) as `/rest`, with the pool's name in the scope, where the
route dependencies look it up (`pool_of`). So llm-d's Go client, which appends
`/predict/bulk/strict`, `/add_training_data_bulk`, `/status` and `/model/...` to its
configured base URL, is pointed at a pool by a base URL of `http://svc:8000/pools/<name>`.
A path without the prefix is the pool `default`, untouched: one string comparison on the
hot path. An invalid name answers 422 naming the field, before any route runs.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import HTTPConnection

from shared.pools import DEFAULT_POOL, URL_PREFIX, PoolNameError, checked_pool_name
from shared.web.limits import ASGIApp, Receive, Scope, Send, send_json

SCOPE_KEY = "latency.pool"


def pool_of(connection: HTTPConnection) -> str:
    """The pool a request is for: its `/pools/<name>` prefix, else `default`."""
    pool: str = connection.scope.get(SCOPE_KEY, DEFAULT_POOL)
    return pool


def split_pool_path(path: str) -> tuple[str, str] | None:
    """(pool name, route path) of a `/pools/<name>/...` path, None for any other path;
    raises PoolNameError for an invalid name."""
    if not path.startswith(URL_PREFIX):
        return None
    name, slash, rest = path[len(URL_PREFIX) :].partition("/")
    if not slash and not name:
        return None  # "/pools/" itself: the pool list's route, if any
    return checked_pool_name(name), "/" + rest


class PoolPrefix:
    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "")
        if scope["type"] not in ("http", "websocket") or not path.startswith(URL_PREFIX):
            await self.app(scope, receive, send)
            return
        try:
            split = split_pool_path(path)
        except PoolNameError as exc:
            detail = [{"loc": ["path", "pool"], "msg": str(exc), "type": "value_error"}]
            await send_json(send, 422, {"detail": detail})
            return
        if split is None:
            await self.app(scope, receive, send)
            return
        pool, route = split
        child: dict[str, Any] = dict(scope)
        child["path"] = route
        child["raw_path"] = route.encode()
        child[SCOPE_KEY] = pool
        await self.app(child, receive, send)
