"""What `latency-predictor advise` was asked, checked: `command` builds it from the flags and
`advise` reads it (a module of its own so neither imports the other for it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Options:
    url: str
    pods: int
    hours: float
    slos: tuple[float | None, float | None]
    seeds: tuple[int, ...]
    policies: tuple[str, ...]
    hardware: str  # the class of rows without a pod_class (and of the pool they make)
    sim_seconds: float | None  # None: sized to the time budget (advisor.workload)
    speedup: float | None
    fit_rows: int
    pool: str | None = None  # None: the rows of every pool in the store
    # --hardware CLASS:COUNT,...: the pool's pods per class, in order; (): split by the
    # rows' classes (advisor.classes)
    counts: tuple[tuple[str, int], ...] = ()
    # --roles prefill:N,decode:M: a P/D pool of these pods per role; (): a P/D pool when
    # the rows show both roles, split by their load (advisor.roles), else monolithic
    roles: tuple[tuple[str, int], ...] = ()
    pd_threshold: int = 16  # the decider's nonCachedTokens (poolsim.roles)
