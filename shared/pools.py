"""Pools: one service answers several endpoint pickers, each for its own pool of pods.

A pool is named in the path (`/pools/<name>/...`); the unprefixed routes are the pool
`default`, so a single-pool deployment is unchanged on the wire. Names follow Kubernetes'
DNS labels (lower-case letters, digits and '-', at most 63 characters), the names operators
already give their InferencePools, and safe as a directory name with no escaping.
Each pool's bundles live in a directory of their own under the model directory; the
default pool's stay at the top, where a single-pool deployment has always kept them.
"""

from __future__ import annotations

import re
from pathlib import Path

DEFAULT_POOL = "default"
POOLS_DIR = "pools"  # <model_dir>/pools/<name>/ holds a named pool's bundles
URL_PREFIX = "/pools/"  # <server>/pools/<name>/<route> is the route of pool <name>
POOL_NAME = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
POOL_NAME_RULE = (
    "1-63 lower-case letters, digits or '-', starting and ending with a letter or digit"
)


class PoolNameError(ValueError):
    """A pool name that is not a DNS label."""


def checked_pool_name(name: str) -> str:
    """`name` if it is a valid pool name, else PoolNameError saying why."""
    if not POOL_NAME.fullmatch(name):
        raise PoolNameError(f"pool name {name[:80]!r} is invalid: {POOL_NAME_RULE}")
    return name


def pool_url(base_url: str, pool: str) -> str:
    """The base URL of `pool`'s routes on the server at `base_url`: the default pool's are
    the unprefixed ones, so a server from before pools is still reached where it was."""
    base = base_url.rstrip("/")
    return base if pool == DEFAULT_POOL else f"{base}{URL_PREFIX}{pool}"


def pool_model_dir(model_dir: Path, pool: str) -> Path:
    """Where `pool`'s bundles are published under the service's model directory."""
    return model_dir if pool == DEFAULT_POOL else model_dir / POOLS_DIR / pool


def pool_dirs(model_dir: Path) -> dict[str, Path]:
    """The named pools with a directory under `model_dir` (each a valid name), sorted."""
    root = model_dir / POOLS_DIR
    if not root.is_dir():
        return {}
    return {
        p.name: p
        for p in sorted(root.iterdir())
        if p.is_dir() and POOL_NAME.fullmatch(p.name) and p.name != DEFAULT_POOL
    }
