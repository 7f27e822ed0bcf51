"""How many pods of each class: --pods split by weights, and a check of the split against
the load the rows record.

The split follows each class's share of the TTFT rows (one per request), which is its
share of the requests. A router that favours a faster class sends it more requests than
its share of the pods, so `load_weights` also counts the pods the rows' load implies, by
Little's law per class: requests in flight = arrival rate x time in flight, so a class's
pods are proportional to its requests (TTFT rows) x its mean request time (mean TTFT +
mean TPOT x (mean output - 1)) / its requests in flight per pod (the mean
num_request_running its TTFT rows saw at dispatch). advise reports it beside the split.

`role_pods` does the same for the roles of a prefill/decode pool, where a request's time
is spread over two pods: a prefill pod is busy for its TTFT rows' TTFT (queue, prefill,
transfer), a decode pod for its TPOT rows' TPOT x (output tokens - 1) plus the TTFT of
the requests it served whole (its TTFT rows). Over the rows' time span that is the
requests each role holds in flight on average; divided by what one of its pods holds it
is the role's pods. What a pod holds is its rows' mean num_request_running plus the
request itself: a row shows the pod the router chose before the request joined it, and a
router chooses the pod holding the fewest, so the count at dispatch runs low, most for a
role of many lightly loaded pods (prefill pods holding one request or none: without the
request, a mixed 6:2 pool's rows read as 7:1).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from advisor.rows import StoreRows


def split_pods(weights: Mapping[str, float], pods: int) -> dict[str, int]:
    """`pods` in proportion to `weights` (at least one each, largest remainder, ties by
    order); with fewer pods than weights, one each to the heaviest."""
    names = sorted(weights, key=lambda n: -weights[n])  # stable: ties keep their order
    if pods < len(names):
        return {n: int(i < pods) for i, n in enumerate(names)}
    total = sum(weights.values()) or 1.0
    quota = {n: pods * weights[n] / total for n in names}
    given = {n: max(1, math.floor(quota[n])) for n in names}
    while sum(given.values()) < pods:  # the largest remainder first
        given[max(names, key=lambda n: quota[n] - given[n])] += 1
    while sum(given.values()) > pods:  # the minimum of one overshot: the most over first
        given[min((n for n in names if given[n] > 1), key=lambda n: quota[n] - given[n])] -= 1
    return given


def load_weights(rows: StoreRows, named: np.ndarray, mean_output: float) -> dict[str, float] | None:
    """Each class's pods up to a common factor, by Little's law (the module docstring);
    None when a class has no TTFT or no TPOT rows, or its rows never saw a request running."""
    weights = {}
    for label in dict.fromkeys(named.tolist()):
        mine = named == label
        ttft, tpot = mine & rows.measures_ttft, mine & rows.measures_tpot
        if not ttft.any() or not tpot.any():
            return None
        in_flight = float(rows.running[ttft].mean())
        if in_flight <= 0:
            return None
        request_ms = rows.ttft_ms[ttft].mean() + rows.tpot_ms[tpot].mean() * max(mean_output - 1, 0)
        weights[str(label)] = float(ttft.sum()) * float(request_ms) / in_flight
    return weights


def role_pods(rows: StoreRows, roles: np.ndarray, mean_output: float) -> dict[str, float] | None:
    """The pods each P/D role's load implies (the module docstring), prefill first; None
    when a role has no rows of the kind it needs."""
    span_s = float(rows.timestamp_s[-1] - rows.timestamp_s[0]) if len(rows) else 0.0
    if span_s <= 0:
        return None
    # the TPOT rows' own output lengths, the mean where a row records none (0 or 1)
    tokens = np.where(rows.tokens_generated > 1, rows.tokens_generated, max(mean_output, 1.0))
    busy_ms = {
        "prefill": rows.ttft_ms * (rows.measures_ttft & (roles == "prefill")),
        "decode": rows.ttft_ms * (rows.measures_ttft & (roles == "decode"))
        + rows.tpot_ms * (tokens - 1) * (rows.measures_tpot & (roles == "decode")),
    }
    pods = {}
    for role, busy in busy_ms.items():
        mine = roles == role
        if not busy.any():
            return None
        in_flight = float(rows.running[mine].mean()) + 1.0  # with the request itself
        pods[role] = float(busy.sum()) / 1000.0 / span_s / in_flight
    return pods
