"""A prefill/decode pool in the answer: a few lines of the screen and the JSON's `roles`."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from advisor.roles import RolePool
from advisor.simulate import Simulation
from advisor.verdict import over_seeds

SPLITS = {
    "roles": "as --roles gives them",
    "load": "--pods split by the load each role's rows imply",
    "even": "--pods halved: the rows do not tell a role's load",
}


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}" if value >= 100 else f"{value:.1f}"


def role_lines(roles: RolePool) -> list[str]:
    simulated = f" (simulated {roles.sim_label})" if roles.sim_label != roles.label else ""
    return [
        f"roles     P/D pool {roles.label}{simulated} ({SPLITS[roles.split]}); rows: "
        f"{roles.prefill_rows:,} from prefill pods, {roles.decode_rows:,} from decode pods; "
        f"split when the decode pod lacks >= {roles.threshold} prompt tokens",
        f"          note: {roles.note}",
        "          note: the pod-model check below rebuilds monolithic pods (a decode pod "
        "never prefills a split request): shown, not judged",
    ]


def role_table(sim: Simulation) -> list[str]:
    """Each policy's figures per role (means over the seeds); nothing for a monolithic run."""
    if not any(s.by_role for runs in sim.policies for s in runs.seeds):
        return []
    lines = [
        "| policy | role (pods) | TTFT p90 ms | TPOT p90 ms | share of requests |",
        "|---|---|---|---|---|",
    ]
    for runs in sim.policies:
        for index in range(len(runs.seeds[0].by_role) if runs.seeds else 0):
            of = [s.by_role[index] for s in runs.seeds]
            ttft = over_seeds([f.ttft_p90_ms for f in of])
            tpot = over_seeds([f.tpot_p90_ms for f in of])
            share = over_seeds([f.share for f in of])
            lines.append(
                f"| {runs.name} | {of[0].role} ({of[0].pods}) "
                f"| {_ms(ttft.mean if ttft else None)} | {_ms(tpot.mean if tpot else None)} "
                f"| {'-' if share is None else f'{share.mean:.0%}'} |"
            )
    return lines


def role_json(roles: RolePool | None) -> dict[str, Any] | None:
    """The P/D pool (None: monolithic); each policy's per-role figures are in its seeds'
    `by_role`."""
    if roles is None:
        return None
    return {**asdict(roles), "pool": roles.label, "simulated": roles.sim_label}
