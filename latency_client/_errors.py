"""Typed errors: every way a prediction can be missing is a PredictionUnavailable, so a
caller needs one `except` to fall back (the picker's composite score does exactly that)."""

from __future__ import annotations


class LatencyClientError(Exception):
    """Base of every error this package raises."""


class PredictionUnavailable(LatencyClientError):
    """No prediction for these rows: every replica tried failed, or answered other than 200."""


class PredictionTimeout(PredictionUnavailable):
    """The caller's deadline passed before an answer arrived."""


class PredictionRejected(PredictionUnavailable):
    """The server answered 422 naming one of this caller's rows: the rows are invalid.

    Only the callers whose rows were named get this; the others merged into the same call
    are answered from a second call without the bad rows."""

    def __init__(self, message: str, detail: object = None) -> None:
        super().__init__(message)
        self.detail = detail


class ClientClosed(PredictionUnavailable):
    """predict() after aclose(), or a call still waiting when the client closed."""
