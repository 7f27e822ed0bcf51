"""Route dependencies over what create_app put on `app.state` (FastAPI Annotated aliases).

Each dependency is async: FastAPI runs a sync one in its threadpool, a hop the hot path
cannot afford.
"""

from __future__ import annotations

from typing import Any

from fastapi import Depends, Request


def from_state(name: str) -> Any:
    """`Annotated[T, from_state("x")]` hands a route `request.app.state.x`."""

    async def dependency(request: Request) -> Any:
        return getattr(request.app.state, name)

    dependency.__name__ = f"state_{name}"
    return Depends(dependency)
