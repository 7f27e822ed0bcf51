"""Shared set-up of the schemathesis runs against the real apps (tests/fuzz).

Why the schema is loaded eagerly from a schema-only app: schemathesis' lazy
`from_fixture` loader reads pytest's private `Item._nodeid`, which pytest 9 removed, so it
fails before running anything. The eager loader makes one pytest item per operation; each
item then calls the real app (real settings, real files) that its fixture built, and the
fixture checks that this app serves exactly the schema being fuzzed.

Why one app per operation: schemathesis ends every ASGI lifespan it started at the end of
each test item (its pytest_runtest_teardown), and an app's lifespan runs once in its life
under uvicorn, so each operation gets a freshly built app over the module's shared store,
model directory and trained bundle.
"""

from __future__ import annotations

import copy
from typing import Any

import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis import checks
from schemathesis.config import SchemathesisConfig
from schemathesis.schemas import BaseSchema

# Generated examples per operation. schemathesis adds a few deterministic explicit ones
# per operation on top (each wrong HTTP method, boundary values of its coverage phase).
MAX_EXAMPLES = 25
SEED = 20261203

# Derandomized: CI sends the same requests on every run. No deadline: an operation's first
# call starts its app (migrations, bundle load), which is not what is measured here.
# Suppressed health checks, each for a reason that is not about the servers:
# - too_slow, data_too_large, filter_too_much: schemathesis builds whole request bodies
#   from nested schemas (rows of eleven fields) and discards the negative cases it cannot
#   make invalid; with a bounded example count none of them can hang CI.
# - function_scoped_fixture: the app fixture is meant to live for all examples of its
#   operation (see above); what examples share (the store, the bundle) is what a real
#   server shares between requests.
FUZZ_SETTINGS = settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.filter_too_much,
        HealthCheck.function_scoped_fixture,
    ],
)


def schemathesis_config(operations: list[dict[str, Any]] | None = None) -> SchemathesisConfig:
    return SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True},
            # Failures should show the request as sent: by default every field whose name holds
            # "token" is masked (input_token_length, prefill_tokens_in_flight, ...).
            "output": {"sanitization": {"enabled": False}},
            "cache": {"enabled": False},
            "operations": operations or [],
        }
    )


def load_schema(spec: dict[str, Any], operations: list[dict[str, Any]] | None = None) -> BaseSchema:
    return schemathesis.openapi.from_dict(spec, config=schemathesis_config(operations))


DETAIL = {"type": "object", "required": ["detail"]}  # an HTTPException's {"detail": ...}
BINARY = {"type": "string", "format": "binary"}


def json_response(description: str, schema: dict[str, Any] = DETAIL) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def raw_response(description: str, media_type: str) -> dict[str, Any]:
    schema = {"type": "string"} if media_type.startswith("text/") else BINARY
    return {"description": description, "content": {media_type: {"schema": schema}}}


# What FastAPI writes for a route that returns a Response it was not told about.
_UNDESCRIBED: dict[str, Any] = {"application/json": {"schema": {}}}


def supplement(
    spec: dict[str, Any], documented: dict[tuple[str, str], dict[str, Any]]
) -> dict[str, Any]:
    """`spec` plus what the wire contract (docs/api.md) and the code say about a
    route but its declaration does not (yet). What the app documents itself wins, so each
    entry turns into a no-op once its route declares it; the report names the fixes.

    documented[(method, path)] = {"responses": {status: response}, "requestBody": ...}"""
    spec = copy.deepcopy(spec)
    for (method, path), extra in documented.items():
        operation = spec["paths"][path][method]
        if "requestBody" in extra:
            operation.setdefault("requestBody", extra["requestBody"])
        for status, response in extra.get("responses", {}).items():
            declared = operation["responses"].get(status)
            if declared is None or declared.get("content") == _UNDESCRIBED:
                operation["responses"][status] = response
    return spec


def _imprecise_int(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return abs(value) > 2**53
    if isinstance(value, dict):
        return any(_imprecise_int(v) for v in value.values())
    if isinstance(value, list):
        return any(_imprecise_int(v) for v in value)
    return False


def call_and_validate(case: Any, app: FastAPI) -> Any:
    """Send `case` to the real app and run every check schemathesis has for it.

    One exception: schemathesis compares integers with a schema bound in floating point, so
    9223372036854775999 passes for <= 2**63 - 1 and a correct 422 reads as "valid data
    rejected". Bodies holding integers past 2**53 skip that one check (positive data
    acceptance); every other check, the 5xx one first, still runs on them."""
    excluded = [checks.positive_data_acceptance] if _imprecise_int(case.body) else []
    return case.call_and_validate(app=app, excluded_checks=excluded)
