"""Prefill/decode (P/D) roles of a pool's pods, and llm-d's decider between the two paths.

In llm-d's P/D deployments each pod carries a role label, prefill or decode. Its endpoint
picker runs the decode profile first (a decode pod among the decode pods); then the
decider (llm-d's `prefix-based-pd-decider`) reads the chosen decode pod's prefix cache:
when the part of the prompt it does not hold is at least `nonCachedTokens` tokens, the
prefill profile also runs and the request is disaggregated (a prefill pod computes the
prompt, its KV moves to the decode pod, which streams the tokens); otherwise the decode
pod serves the whole request as a monolithic pod would. llm-d's sample P/D config
(deploy/config/pd-epp-config.yaml) sets the threshold to 16 tokens, the plugin's README
example to 512; 0 turns disaggregation off.

`--roles prefill:2,decode:6` gives the roles in pod order (here pods 0-1 prefill, 2-7
decode), beside `--hardware`, which gives the classes in the same order. A pod without
a role (a monolithic pool) has the role "".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from poolsim.kv_transfer import KvTransfer
from poolsim.request import Request

PREFILL = "prefill"
DECODE = "decode"
MONOLITHIC = ""  # a pod of a pool without roles; also the profile of a monolithic pick
ROLES = (PREFILL, DECODE)
DEFAULT_PD_THRESHOLD = 16  # llm-d's sample P/D config (nonCachedTokens)

ROLES_HELP = (
    "prefill:COUNT,decode:COUNT: a prefill/decode disaggregated pool, the roles given to "
    "the pods in that order (--pods defaults to the counts' sum and must equal it when "
    "given; --hardware classes apply in the same pod order)"
)
THRESHOLD_HELP = (
    "P/D pools: disaggregate a request when the decode pod chosen for it lacks at least "
    "this many of its prompt tokens in its prefix cache (llm-d's prefix-based-pd-decider "
    "nonCachedTokens; 16 as in llm-d's sample P/D config; 0: never)"
)


class RolesSpecError(ValueError):
    """A `--roles` value that names no pool (the message says why)."""


def parse_roles(spec: str, pods: int | None) -> list[str]:
    """Each pod's role in pod order from a `--roles` value; `pods` (None: --pods not
    given) must equal the counts' sum. RolesSpecError naming the problem otherwise."""
    counts: dict[str, int] = {}
    for part in (p.strip() for p in spec.split(",")):
        role, colon, count_text = part.partition(":")
        role = role.strip()
        if role not in ROLES:
            raise RolesSpecError(f"--roles {spec!r}: unknown role {role!r}; {ROLES_HELP}")
        if not colon:
            raise RolesSpecError(f"--roles {spec!r}: {role} has no count; {ROLES_HELP}")
        if role in counts:
            raise RolesSpecError(f"--roles {spec!r}: {role} is listed twice")
        try:
            count = int(count_text)
        except ValueError:
            count = 0
        if count < 1:
            raise RolesSpecError(
                f"--roles {spec!r}: the count of {role} must be a positive integer, "
                f"not {count_text!r}"
            )
        counts[role] = count
    missing = [role for role in ROLES if role not in counts]
    if missing:
        raise RolesSpecError(f"--roles {spec!r}: no {missing[0]} pods; {ROLES_HELP}")
    roles = [role for role, count in counts.items() for _ in range(count)]
    if pods is not None and pods != len(roles):
        raise RolesSpecError(
            f"--roles {spec!r} has {len(roles)} pods but --pods is {pods}: leave --pods out "
            "(it defaults to the counts' sum) or make them agree"
        )
    return roles


def roles_label(roles: Sequence[str]) -> str:
    """`prefill:2,decode:6` (counts in order of first appearance)."""
    counts: dict[str, int] = {}
    for role in roles:
        counts[role] = counts.get(role, 0) + 1
    return ",".join(f"{role}:{count}" for role, count in counts.items())


@dataclass(frozen=True, slots=True)
class PdConfig:
    """A P/D pool: each pod's role in pod order, the decider's threshold, the transfer."""

    roles: tuple[str, ...]
    threshold: int = DEFAULT_PD_THRESHOLD
    transfer: KvTransfer = field(default_factory=KvTransfer)

    def __post_init__(self) -> None:
        if self.threshold < 0:
            raise ValueError("the P/D threshold must be >= 0")
        if any(role not in ROLES for role in self.roles):
            raise ValueError(f"roles must be {' or '.join(ROLES)}")
        if DECODE not in self.roles:
            raise ValueError("a P/D pool needs at least one decode pod")


def uncached_tokens(request: Request, matched_blocks: int, block_size: int) -> int:
    """Prompt tokens a pod lacks given its matched prefix blocks."""
    return max(request.input_tokens - matched_blocks * block_size, 0)


def disaggregate(uncached: int, threshold: int) -> bool:
    """The decider: split the request when the decode pod lacks at least `threshold`
    prompt tokens (0: never split)."""
    return threshold > 0 and uncached >= threshold
