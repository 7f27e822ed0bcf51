"""`latency-predictor predict`: one row to `POST /predict`, from flags or a JSON file.

The flags are made from the PredictionRequest schema, one per field, so they follow it;
the server judges the values (its 422 names the field). Flags given with --file override
the file's fields. With --pool NAME the row goes to that pool's model (/pools/NAME/predict).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from annotated_types import Ge, Le

from latency_cli.calls import (
    PREDICTION_URL,
    CliError,
    UsageError,
    add_pool_argument,
    answered,
    call,
    client,
    detail,
    http_url,
)
from latency_cli.table import align
from shared.pools import pool_url
from shared.schemas import PredictionRequest

FIELDS = PredictionRequest.model_fields


def flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url",
        type=http_url,
        default=PREDICTION_URL,
        help=f"prediction server, or a training server ({PREDICTION_URL})",
    )
    add_pool_argument(parser)
    parser.add_argument("--json", action="store_true", help="the server's JSON answer")
    parser.add_argument(
        "--file", metavar="ROW.json", help="the row as one JSON object ('-': standard input)"
    )
    fields = parser.add_argument_group(
        "row fields (without --file the required ones must be "
        "given; the others default like the schema)"
    )
    for name, info in FIELDS.items():
        kind: type = int if info.annotation is int else float if info.annotation is float else str
        fields.add_argument(
            flag(name),
            dest=name,
            type=kind,
            default=None,
            metavar=kind.__name__.upper(),
            help=_field_help(name, kind),
        )


def _field_help(name: str, kind: type) -> str:
    info = FIELDS[name]
    low = next((m.ge for m in info.metadata if isinstance(m, Ge)), None)
    high = next((m.le for m in info.metadata if isinstance(m, Le)), None)
    if kind is float and low is not None and high is not None:
        text = f"{low:g}..{high:g}"
    elif low is not None:
        text = f">= {low}"
    elif name == "pod_type":
        text = "'' (monolithic), prefill, decode or any role label"
    elif name == "pod_class":
        text = "the pod's hardware class (h200, b200, ...; ours), '' for none"
    else:
        text = kind.__name__
    return f"{text}; {'required' if info.is_required() else f'default {info.default!r}'}"


def run(args: argparse.Namespace) -> int:
    row = build_row(args)
    url = pool_url(args.url, args.pool)
    with client() as c:
        reply = call(c, "POST", url, "/predict", "prediction server", json=row)
    if reply.status_code == 422:
        raise CliError(f"the server at {url} refused the row: {detail(reply)}")
    if reply.status_code != 200:
        raise answered(reply, f"POST {url}/predict")
    answer = reply.json()
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print(
            align(
                [
                    ["ttft_ms", f"{answer['ttft_ms']:.2f}"],
                    ["tpot_ms", f"{answer['tpot_ms']:.2f}"],
                    ["model version", str(answer.get("model_version"))],
                    [
                        "quantile",
                        (
                            f"{answer['quantile']:g} ({answer.get('objective_type', '?')}, "
                            f"{answer.get('model_type', '?')})"
                        ),
                    ],
                ]
            )
        )
    return 0


def build_row(args: argparse.Namespace) -> dict[str, Any]:
    """The file's row (if any) with every given flag on top; without a file, the schema's
    defaults for optional fields that were not given. UsageError for missing required ones."""
    row = read_row(args.file) if args.file is not None else {}
    row.update({n: getattr(args, n) for n in FIELDS if getattr(args, n) is not None})
    if args.file is None:
        missing = [flag(n) for n, info in FIELDS.items() if info.is_required() and n not in row]
        if missing:
            raise UsageError(f"missing {', '.join(missing)} (or give the row with --file)")
        for name, info in FIELDS.items():
            row.setdefault(name, info.default)
    return row


def read_row(source: str) -> dict[str, Any]:
    name = "standard input" if source == "-" else source
    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"cannot read {name}: {getattr(exc, 'strerror', None) or exc}") from None
    try:
        row = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{name} is not JSON: {exc}") from None
    if not isinstance(row, dict):
        raise CliError(
            f"{name} must hold one JSON object (a prediction row), not a {type(row).__name__}"
        )
    return row
