"""python -m training_server [--host H] [--port P]; configured by environment variables."""

from __future__ import annotations

from collections.abc import Sequence

from shared.settings import TrainingSettings
from shared.web.server import serve
from training_server.app import create_app


def main(argv: Sequence[str] | None = None) -> None:
    serve("latency-predictor training server", TrainingSettings, create_app, argv)


if __name__ == "__main__":
    main()
