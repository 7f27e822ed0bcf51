"""The image's default command: start the server that SERVER_TYPE names.

llm-d's Helm chart runs the same default command in every predictor container of the
pod and tells each its role only through the environment (docs/llm-d-chart.md):

    SERVER_TYPE=training, empty or unset   the training server (TRAINING_PORT, 8000)
    SERVER_TYPE=prediction-<n>             a prediction server (PREDICT_PORT, 8001)

    python -m latency_cli.serve [--host H] [--port P]    (also: latency-serve)

The flags win over the environment, as for `python -m training_server`. Any other
SERVER_TYPE exits with status 2 and one line saying which values are understood.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Sequence
from enum import StrEnum

PREDICTION_TYPE = re.compile(r"prediction(-.+)?")


class ServerKind(StrEnum):
    TRAINING = "training"
    PREDICTION = "prediction"


class UnknownServerType(ValueError):
    def __init__(self, value: str):
        super().__init__(
            f"SERVER_TYPE={value!r} names no server: use 'training' (or leave it unset) "
            "or 'prediction-<n>'"
        )


def server_kind(server_type: str | None) -> ServerKind:
    """Which server a SERVER_TYPE value names (llm-d's chart: training, prediction-1, ...)."""
    value = (server_type or "").strip()
    if value in ("", ServerKind.TRAINING):
        return ServerKind.TRAINING
    if PREDICTION_TYPE.fullmatch(value):
        return ServerKind.PREDICTION
    raise UnknownServerType(value)


def main(argv: Sequence[str] | None = None) -> None:
    try:
        kind = server_kind(os.environ.get("SERVER_TYPE"))
    except UnknownServerType as exc:
        print(f"latency-serve: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    # Imported here: each server loads only its own modules.
    if kind is ServerKind.TRAINING:
        from training_server.__main__ import main as run
    else:
        from prediction_server.__main__ import main as run
    run(argv)


if __name__ == "__main__":
    main()
