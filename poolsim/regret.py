"""Decision regret: what each pick cost against the best pod at that instant.

At every pick, after the policy chose and before the request reaches the pod, the meter
asks the oracle's look-ahead (poolsim.oracle) two questions on the pods' exact state: the
least TTFT any pod would give the request, and the TTFT the chosen pod will give it; the
regret is the difference (ms, >= 0; within the oracle's tie tolerance it is 0). Like the
oracle it knows no later arrivals, so it judges each route greedily on TTFT: 0 for every
oracle pick, and a pick with positive regret may still have been a fair trade (e.g. for a
later request's prefix cache). Simulated time does not move while it looks ahead.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from poolsim.oracle import TIE_S, least_lookahead_ttft, lookahead_ttft
from poolsim.pod import Pod
from poolsim.request import Request


class RegretMeter:
    def __init__(self) -> None:
        self.regrets: list[tuple[float, float]] = []  # (arrival_s, regret ms) per pick
        self.lookaheads = 0

    def measure(
        self, pods: Sequence[Pod], request: Request, chosen: int, now_s: float
    ) -> float | None:
        """Record and return the pick's regret in ms; None (not recorded) when the chosen
        pod or every pod reach no first token within the look-ahead's step cap."""
        search = least_lookahead_ttft(pods, request, now_s)
        self.lookaheads += search.lookaheads
        if math.isinf(search.best_s):
            return None
        mine = search.ttfts_s[chosen]
        if math.isinf(mine):  # pruned or given up on: slower than the best, by how much?
            self.lookaheads += 1
            mine = lookahead_ttft(pods[chosen], request, now_s, float("inf"))
            if math.isinf(mine):
                return None
        gap = mine - search.best_s
        regret = gap * 1000.0 if gap > TIE_S else 0.0
        self.regrets.append((request.arrival_s, regret))
        return regret
