"""JSON request bodies that FastAPI parses itself, made to fail as the contract says: every
malformed or unrepresentable body is a 422 naming the field, never a 500 or a 400."""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute

from shared.wire import finite_or_null


class _JSONBodyRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            raw = await self.body()
            try:
                self._json = json.loads(raw)
            except UnicodeDecodeError as exc:  # FastAPI answers 400 for it, not 422
                raise json.JSONDecodeError(
                    f"body is not UTF-8 ({exc.reason})", raw.decode("utf-8", "replace"), exc.start
                ) from None
        return self._json


class JSONBodyRoute(APIRoute):
    """A route whose JSON body FastAPI parses and validates, made to answer every bad body
    with the contract's 422 (spec section 2) instead of FastAPI's 500 or 400:

    - Python's parser reads NaN, Infinity and 1e999 (as inf); pydantic then refuses them,
      rightly, but its error echoes the value and FastAPI's JSONResponse cannot write it:
      500. Here such inputs are echoed as null and the error still names the field.
    - A body that is not UTF-8 (or UTF-16/32) answers a JSON decode error, as bad JSON does.
    """

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()
        if self.body_field is None:  # the endpoint reads its body itself, if at all
            return handler

        async def json_body_handler(request: Request) -> Response:
            try:
                return await handler(_JSONBodyRequest(request.scope, request.receive))
            except RequestValidationError as exc:
                raise RequestValidationError(
                    finite_or_null(exc.errors()), body=exc.body, endpoint_ctx=exc.endpoint_ctx
                ) from None

        return json_body_handler
