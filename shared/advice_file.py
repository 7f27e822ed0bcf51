"""Where a pool's advice file is: the forms LATENCY_ADVICE_FILE (read by GET /advice of each
pool) and `latency-predictor advise --json` (which writes it) both take.

- a path with `{pool}` in it: each pool's own file, named by putting the pool's name in
  (`default` for the unprefixed routes), e.g. /advice/{pool}.json;
- a directory (one that exists, or a path ending in `/`): <dir>/{pool}.json;
- any other path: one file. For the trainer it is the default pool's alone (what it was
  before pools); every named pool keeps advice.json in its own model directory.

Any other `{...}` is refused. Pool names are DNS labels (shared.pools): put in a path they
add no separator, so a pool's file never leaves the template's folder.
"""

from __future__ import annotations

from pathlib import Path

POOL_PLACEHOLDER = "{pool}"
PER_POOL_FILE = f"{POOL_PLACEHOLDER}.json"  # a directory stands for <dir>/{pool}.json


def template_problem(text: str) -> str | None:
    """Why `text` is not an advice file path or template; None when it is one."""
    rest = text.replace(POOL_PLACEHOLDER, "")
    if "{" in rest or "}" in rest:
        return f"the only placeholder is {POOL_PLACEHOLDER} (each pool's name)"
    return None


def ends_as_directory(text: str) -> bool:
    """A path ending in `/` names a directory, even one not made yet (Path drops the `/`)."""
    return text.endswith("/")


def as_template(text: str) -> str:
    """`text` with a directory spelt as the per-pool template it stands for."""
    if ends_as_directory(text):
        return f"{text}{PER_POOL_FILE}"
    if POOL_PLACEHOLDER not in text and text and Path(text).is_dir():
        return str(Path(text) / PER_POOL_FILE)
    return text


def is_per_pool(template: str) -> bool:
    return POOL_PLACEHOLDER in template


def pool_file(template: str, pool: str) -> Path:
    """The file of `pool` under a template (as_template's)."""
    return Path(template.replace(POOL_PLACEHOLDER, pool))
