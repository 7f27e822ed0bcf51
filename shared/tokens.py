"""The API token as configured (LATENCY_API_TOKEN or LATENCY_API_TOKEN_FILE), for the
servers that check it (shared.web.auth) and for whatever calls them with it: a prediction
server syncing from the trainer, the command-line tools.
"""

from __future__ import annotations

from collections.abc import Generator
from pathlib import Path

import httpx

from shared.settings import CommonSettings


class TokenSource:
    """The configured token; a file (a Kubernetes Secret volume) is re-read when it changes,
    so a rotated secret takes effect without a restart."""

    def __init__(self, settings: CommonSettings):
        self.inline = settings.api_token.get_secret_value() if settings.api_token else None
        self.path: Path | None = settings.api_token_file
        self._stamp: tuple[int, int, int] | None = None
        self._from_file: str | None = None

    def current(self) -> str | None:
        if self.path is None:
            return self.inline or None
        try:
            stat = self.path.stat()
        except OSError:
            # A configured but unreadable secret must not open the routes: refuse everyone.
            return ""
        # A Secret volume swaps a symlink: a new inode even when mtime and size match.
        stamp = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        if stamp != self._stamp:
            try:
                self._from_file = self.path.read_text().strip()
            except OSError:
                return ""
            self._stamp = stamp
        return self._from_file

    @property
    def configured(self) -> bool:
        return self.path is not None or bool(self.inline)


class TokenAuth(httpx.Auth):
    """httpx auth for one of our servers calling another (a prediction server syncing from
    the trainer): the token as configured at each request, so rotation needs no restart."""

    def __init__(self, settings: CommonSettings):
        self.source = TokenSource(settings)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        token = self.source.current()
        if token:
            request.headers["Authorization"] = f"Bearer {token}"
        yield request
