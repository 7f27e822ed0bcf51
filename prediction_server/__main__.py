"""python -m prediction_server [--host H] [--port P]; configured by environment variables."""

from __future__ import annotations

from collections.abc import Sequence

from prediction_server.app import create_app
from shared.lean import keep_scikit_learn_out
from shared.settings import PredictionSettings
from shared.web.server import serve


def main(argv: Sequence[str] | None = None) -> None:
    keep_scikit_learn_out()
    serve(
        "latency-predictor prediction server",
        PredictionSettings,
        create_app,
        argv,
        factory_path="prediction_server.app:create_app_from_env",
    )


if __name__ == "__main__":
    main()
