"""HTTP for the `latency-predictor` subcommands: bounded timeouts, only the URL given (no
proxy from the environment), and expected failures as one-line messages instead of tracebacks.
"""

from __future__ import annotations

import argparse
import re
from typing import Any
from urllib.parse import urlsplit

import httpx

from shared.pools import DEFAULT_POOL, PoolNameError, checked_pool_name
from shared.settings import CommonSettings
from shared.tokens import TokenAuth

TIMEOUT_S = 10.0
TRAINING_URL = "http://127.0.0.1:8000"
PREDICTION_URL = "http://127.0.0.1:8001"


class CliError(Exception):
    """An expected failure (server down, refused input, unreadable file): one line, exit 1."""


class Unreachable(CliError):
    """No answer at all: connection refused, timed out, name not resolved."""


class UsageError(Exception):
    """The command line itself is wrong: argparse's usage message, exit 2."""


def http_url(value: str) -> str:
    """argparse type: an http(s) URL with a host, without its trailing slash."""
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise argparse.ArgumentTypeError(f"not an http:// or https:// URL: {value!r}")
    return value.rstrip("/")


def pool_name(value: str) -> str:
    """argparse type: a pool name (a DNS label); argparse names --pool in its message."""
    try:
        return checked_pool_name(value)
    except PoolNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_pool_argument(
    parser: argparse.ArgumentParser, where: str = "its routes under /pools/NAME"
) -> None:
    parser.add_argument(
        "--pool",
        type=pool_name,
        default=DEFAULT_POOL,
        metavar="NAME",
        help=f"the pool: {where} ({DEFAULT_POOL}: the unprefixed routes)",
    )


def client() -> httpx.Client:
    # trust_env=False: no proxy or netrc from the environment; the request goes to the URL.
    # The servers' own token settings (LATENCY_API_TOKEN[_FILE]) authorise admin calls such
    # as export and import; read from the environment, never from a flag in shell history.
    return httpx.Client(
        timeout=TIMEOUT_S, trust_env=False, follow_redirects=False, auth=TokenAuth(CommonSettings())
    )


def reason(exc: httpx.HTTPError) -> str:
    """Why a request got no answer, in a few words: "connection refused", "no answer in 10 s"."""
    if isinstance(exc, httpx.TimeoutException):
        return f"no answer within {TIMEOUT_S:g} s"
    text = re.sub(r"^\[Errno -?\d+\]\s*", "", str(exc)).strip()
    if isinstance(exc, httpx.ConnectError) and "refused" in text.lower():
        return "connection refused"
    return text[:1].lower() + text[1:] if text else type(exc).__name__


def unreachable(what: str, url: str, exc: httpx.HTTPError) -> Unreachable:
    return Unreachable(f"cannot reach the {what} at {url}: {reason(exc)}")


def call(
    c: httpx.Client, method: str, url: str, path: str, what: str, **kwargs: Any
) -> httpx.Response:
    """One request; a transport failure becomes CliError("cannot reach the <what> at ...")."""
    try:
        return c.request(method, f"{url}{path}", **kwargs)
    except httpx.HTTPError as exc:
        raise unreachable(what, url, exc) from None


def detail(reply: httpx.Response) -> str:
    """The server's reason for a non-2xx answer: FastAPI's `detail` string, or its field
    errors as "field: message; ..." (the leading "body" of each location dropped)."""
    try:
        body = reply.json()
    except ValueError:
        return reply.text.strip()[:300] or reply.reason_phrase
    found = body.get("detail") if isinstance(body, dict) else None
    if isinstance(found, str):
        return found
    if isinstance(found, list) and all(isinstance(e, dict) for e in found):
        return "; ".join(_field_error(e) for e in found)
    return reply.text.strip()[:300]


def _field_error(error: dict[str, Any]) -> str:
    loc = [str(p) for p in error.get("loc", ()) if p != "body"]
    return f"{'.'.join(loc) or 'body'}: {error.get('msg', 'invalid')}"


def answered(reply: httpx.Response, what: str) -> CliError:
    """A CliError for an answer the command cannot use: "<what> answered 500: <detail>"."""
    return CliError(f"{what} answered {reply.status_code}: {detail(reply)}")
