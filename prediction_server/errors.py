"""Domain errors of the predict pipeline; the routes translate them to HTTP at the edge."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError


class InvalidBatch(Exception):
    """A request body the contract answers with 422. `errors` are FastAPI-shaped entries
    (loc, msg, type, input); `reason` labels the refusal in the error counter."""

    def __init__(self, reason: str, errors: list[dict[str, Any]]):
        super().__init__(f"{reason}: {errors}")
        self.reason = reason
        self.errors = errors


def errors_at(exc: ValidationError, prefix: list[Any]) -> list[dict[str, Any]]:
    """pydantic's errors with their locations under `prefix` (e.g. body.requests)."""
    return [
        {**e, "loc": [*prefix, *e["loc"]]}
        for e in exc.errors(include_url=False, include_context=False)
    ]
