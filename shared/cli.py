"""`latency-predictor` command: demo, migrate, and the two servers.

    latency-predictor demo [--duration 60]   both servers + a built-in load, then stop
    latency-predictor migrate                 alembic upgrade head on LATENCY_DB_URL
    latency-predictor retrains [-n 10]        the last retrains and their metrics
    latency-predictor training-server|prediction-server [--host H --port P]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(prog="latency-predictor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run both servers locally with a built-in load")
    demo.add_argument("--duration", type=float, default=60.0, help="seconds of load (60)")
    demo.add_argument("--rows-per-second", type=int, default=200)
    demo.add_argument("--var", default="./var", help="folder for the SQLite file and models")
    demo.add_argument("--training-port", type=int, default=8000)
    demo.add_argument("--prediction-port", type=int, default=8001)
    sub.add_parser("migrate", help="upgrade the store schema to the newest revision")
    retrains = sub.add_parser("retrains", help="the last retrains with their held-out metrics")
    retrains.add_argument("--url", default="http://127.0.0.1:8000", help="training server")
    retrains.add_argument("-n", "--limit", type=int, default=10)
    retrains.add_argument("--json", action="store_true", help="JSON instead of a table")
    sub.add_parser("training-server", help="run the training server", add_help=False)
    sub.add_parser("prediction-server", help="run the prediction server", add_help=False)
    if args and args[0] in ("training-server", "prediction-server"):
        _server(args[0], args[1:])
        return
    parsed = parser.parse_args(args)
    if parsed.command == "demo":
        from shared.demo import run_demo

        run_demo(parsed)
    elif parsed.command == "retrains":
        from shared.retrains_table import show_retrains

        raise SystemExit(show_retrains(parsed.url, parsed.limit, parsed.json))
    elif parsed.command == "migrate":
        from shared.settings import TrainingSettings
        from training_server.migrate import upgrade

        url = TrainingSettings().db_url
        upgrade(url)
        print(f"store at {url} is at the newest revision")  # noqa: T201 (CLI output)


def _server(name: str, argv: list[str]) -> None:
    """The same start-up as `python -m training_server` / `python -m prediction_server`."""
    if name == "training-server":
        from training_server.__main__ import main as training_main

        training_main(argv)
    else:
        from prediction_server.__main__ import main as prediction_main

        prediction_main(argv)

if __name__ == "__main__":
    main()
