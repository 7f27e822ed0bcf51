"""Per-role figures of a prefill/decode pool's run (poolsim.roles), as `by_role`.

A request touches the decode role always (its decode pod serves it, whole or after a
prefill elsewhere) and the prefill role when the decider split it. Each role's figures
are over the requests that touched its pods: TTFT p90, TPOT p90 (decode only: a prefill
pod streams no tokens), SLO attainment (a request still unfinished at the end is a
miss), their share of all routed requests, and the served p90 coverages a predicted
policy reports for that role (`served_ttft_coverage@ROLE`; None otherwise).
"""

from __future__ import annotations

from typing import TypedDict

import numpy as np

from poolsim.engine import RunResult
from poolsim.roles import DECODE, PREFILL, ROLES


class RoleFigures(TypedDict):
    pods: int
    requests: int  # routed through this role's pods (completed or not)
    share: float  # of all routed requests
    ttft_ms: float | None  # p90 of those completed
    tpot_ms: float | None  # p90; None for prefill
    slo_attainment: float | None  # of those with an SLO (unfinished: missed)
    served_ttft_coverage: float | None
    served_tpot_coverage: float | None


def _p90(values: list[float]) -> float | None:
    return float(np.percentile(np.asarray(values), 90)) if values else None


def by_role(result: RunResult) -> dict[str, RoleFigures]:
    """Prefill and decode figures of a P/D run (see the module docstring)."""
    assert result.pd is not None
    routes = result.pd_routes
    touched = {
        PREFILL: {rid for rid, route in routes.items() if route.prefill is not None},
        DECODE: set(routes),
    }
    out: dict[str, RoleFigures] = {}
    for role in ROLES:
        ids = touched[role]
        done = [c for c in result.completions if c.request.id in ids]
        met = [c.slo_met for c in done if _has_slo(c.request.slo_ttft_ms, c.request.slo_tpot_ms)]
        met += [
            False
            for r in result.unfinished
            if r.id in ids and _has_slo(r.slo_ttft_ms, r.slo_tpot_ms)
        ]
        tpots = [c.tpot_ms for c in done if c.tpot_ms is not None]
        summary = result.policy_summary
        out[role] = {
            "pods": result.pd.roles.count(role),
            "requests": len(ids),
            "share": len(ids) / len(routes) if routes else 0.0,
            "ttft_ms": _p90([c.ttft_ms for c in done]),
            "tpot_ms": _p90(tpots) if role == DECODE else None,
            "slo_attainment": sum(met) / len(met) if met else None,
            "served_ttft_coverage": summary.get(f"served_ttft_coverage@{role}"),
            "served_tpot_coverage": summary.get(f"served_tpot_coverage@{role}"),
        }
    return out


def _has_slo(slo_ttft_ms: float | None, slo_tpot_ms: float | None) -> bool:
    return slo_ttft_ms is not None or slo_tpot_ms is not None
