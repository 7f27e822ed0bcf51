"""`latency-predictor simulate --roles`: the flags of a prefill/decode pool, checked.

`--roles prefill:2,decode:6` gives the roles in pod order (poolsim.roles); `--hardware`
gives the classes in the same order, so `--hardware h200:2,b200:6` with those roles puts
the prefill role on the two h200 pods. `--pd-threshold` is the decider's nonCachedTokens
(the predicted policies get it too: latency-first's decode profile needs to know which
pods would split a request). Such a pool cannot grow (`--join`): a usage error naming
`--roles`.
"""

from __future__ import annotations

import argparse
from typing import Any

from poolsim.hardware import Hardware, parse_hardware
from poolsim.roles import PdConfig, parse_roles, roles_label


class PdUsageError(ValueError):
    """P/D flags that do not describe a run (the message says why)."""


def pd_pool(args: argparse.Namespace) -> tuple[list[Hardware], PdConfig]:
    """Each pod's class and the P/D settings from --roles, --hardware, --pods and
    --pd-threshold (poolsim.hardware.HardwareSpecError from --hardware itself)."""
    roles = parse_roles(args.roles, args.pods)
    pool = parse_hardware(args.hardware, None, default_pods=len(roles))
    if len(pool) != len(roles):
        raise PdUsageError(
            f"--roles {args.roles!r} has {len(roles)} pods but --hardware {args.hardware!r} "
            f"has {len(pool)}: make them agree"
        )
    if args.pd_threshold < 0:
        raise PdUsageError("--pd-threshold must be >= 0")
    if getattr(args, "join", None):
        raise PdUsageError("--roles: a P/D pool cannot take --join (it does not grow yet)")
    return pool, PdConfig(tuple(roles), args.pd_threshold)


def describe(config: PdConfig) -> str:
    """The command's header line for a P/D pool."""
    transfer = config.transfer
    return (
        f"P/D pool {roles_label(config.roles)}: split when the decode pod lacks >= "
        f"{config.threshold} prompt tokens; KV transfer {transfer.bytes_per_token:,} B/token "
        f"at {transfer.link_bytes_per_s / 1e9:g} GB/s + {transfer.setup_ms:g} ms"
    )


def to_json(config: PdConfig) -> dict[str, Any]:
    """What `--json` echoes of a P/D pool (`pd`)."""
    transfer = config.transfer
    return {
        "roles": list(config.roles),
        "threshold_tokens": config.threshold,
        "kv_bytes_per_token": transfer.bytes_per_token,
        "link_bytes_per_s": transfer.link_bytes_per_s,
        "transfer_setup_ms": transfer.setup_ms,
    }
