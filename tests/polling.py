"""The one way a test waits for something: `eventually(probe, timeout, what)`.

The probe answers something falsy (None, False, 0, an empty list) while the condition does
not hold yet, and something truthy once it does: that first truthy answer is returned. At the
timeout the wait fails with an AssertionError naming `what` and the probe's last answer.

An exception the probe raises ends the wait at once, as a failure: an assertion inside a
probe is an invariant that must hold at every poll. Only the exception types named in
`retrying` count as "not yet" (say httpx.HTTPError while a server restarts); the last one is
then quoted in the timeout's message and chained to it.

A wait that shows something does NOT happen for a while polls an observable proving the
ticks happened (a counter, a timestamp, a version that moved), its probe asserting the
invariant at each poll, rather than sleeping blindly. tests/test_polling.py fails the suite
when a test module sleeps in a loop of its own or sleeps more than 0.5 s at once.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

INTERVAL_S = 0.05


def eventually(
    probe: Callable[[], T | None],
    timeout: float,
    what: str,
    *,
    interval: float = INTERVAL_S,
    retrying: tuple[type[Exception], ...] = (),
    detail: Callable[[], str] | None = None,
) -> T:
    """Call `probe` every `interval` seconds until it answers something truthy (returned),
    for at most `timeout` seconds (the probe is called once more at the deadline).

    `detail`: read at the timeout only, appended to the message (say a server log's tail).
    """
    deadline = time.monotonic() + timeout
    last: object = None
    error: Exception | None = None
    while True:
        try:
            answer = probe()
        except retrying as exc:
            last, error = None, exc
        else:
            if answer:
                return answer
            last, error = answer, None
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        time.sleep(min(interval, remaining))
    told = f"last error: {error!r}" if error is not None else f"last answer: {last!r}"
    message = f"not within {timeout:g} s: {what} ({told})"
    if detail is not None:
        message += "\n" + detail()
    raise AssertionError(message) from error
