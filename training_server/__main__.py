"""python -m training_server [--host H] [--port P]; configured by environment variables."""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError

from shared.lean import keep_scikit_learn_out
from shared.settings import LegacyArtifacts, TrainingSettings
from shared.web.server import serve
from training_server.app import create_app


def main(argv: Sequence[str] | None = None) -> None:
    if not _writes_legacy_files():
        keep_scikit_learn_out()
    serve("latency-predictor training server", TrainingSettings, create_app, argv)


def _writes_legacy_files() -> bool:
    """Whether the settings ask for llm-d's legacy files (bad settings: leave the process
    as it is, for serve() to report them in one line)."""
    try:
        return TrainingSettings().legacy_artifacts is not LegacyArtifacts.NONE
    except ValidationError:
        return True


if __name__ == "__main__":
    main()
