"""`latency-predictor pools`: the pools a training server keeps (`GET /pools`), as a table
or JSON: each pool's model version, stored samples, last retrain, failure streak, and the
training replica that retrains it (its owner).

The other commands take `--pool NAME` to ask about one of them.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from latency_cli.calls import TRAINING_URL, CliError, answered, call, client, http_url
from latency_cli.table import align

TRAINING = "training server"
HEADER = ["pool", "model version", "training samples", "last retrain (UTC)", "failures", "owner"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        "--training-url",
        dest="url",
        type=http_url,
        default=TRAINING_URL,
        metavar="URL",
        help=f"training server ({TRAINING_URL})",
    )
    parser.add_argument("--json", action="store_true", help="the server's JSON answer")


def run(args: argparse.Namespace) -> int:
    listing = read_pools(args.url)
    print(json.dumps(listing, indent=2) if args.json else render(listing))
    return 0


def read_pools(url: str) -> dict[str, Any]:
    with client() as c:
        reply = call(c, "GET", url, "/pools", TRAINING)
    if reply.status_code == 404:  # a trainer from before pools: it serves `default` only
        raise CliError(f"the {TRAINING} at {url} has no GET /pools (a release before pools)")
    if reply.status_code != 200:
        raise answered(reply, f"GET {url}/pools")
    try:
        listing = reply.json()
    except ValueError:
        listing = None
    pools = listing.get("pools") if isinstance(listing, dict) else None
    if not isinstance(pools, list) or not all(isinstance(p, dict) for p in pools):
        raise CliError(f"the {TRAINING} at {url}/pools answered no list of pools")
    found: dict[str, Any] = listing
    return found


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def _row(pool: dict[str, Any]) -> list[str]:
    last = pool.get("last_retrain_at")
    return [
        str(pool.get("name")),
        pool.get("model_version") or "none yet",
        _cell(pool.get("training_samples")),
        str(last)[:19].replace("T", " ") if last else "none yet",
        _cell(pool.get("consecutive_retrain_failures")),
        _cell(pool.get("owner")),  # "-": no replica holds it now (or a trainer before leases)
    ]


def render(listing: dict[str, Any]) -> str:
    rows = [HEADER, *(_row(p) for p in listing["pools"])]
    count = len(listing["pools"])
    footer = f"{count} pool{'' if count == 1 else 's'} of at most {_cell(listing.get('max_pools'))}"
    return f"{align(rows, right=(2, 4))}\n\n{footer}"
