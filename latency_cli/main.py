"""`latency-predictor` command: demo, migrate, operator tools, and the two servers.

    latency-predictor demo [--duration 60]   both servers + a built-in load, then stop
    latency-predictor migrate                 alembic upgrade head on LATENCY_DB_URL
    latency-predictor status [--training-url URL] [--prediction-url URL ...] [--json]
                                              health, versions, samples, last retrain, leader
    latency-predictor retrains [-n 10]        the last retrains and their metrics
    latency-predictor pools [--url URL]       the pools a training server keeps
    latency-predictor predict (--file ROW.json | --input-token-length N ...) [--json]
                                              one row to POST /predict
    latency-predictor export [-o FILE]        download the current model bundle (.tar.gz)
    latency-predictor import FILE [--url URL | --model-dir DIR]
                                              publish a bundle on a trainer, or into a
                                              model directory with no server (cold start)
    latency-predictor simulate [--pods 8] [--workload mixed] [--policies ...]
                                              routing policies compared on simulated pods
    latency-predictor advise --db URL --pods N [--hours 6] ...
                                              should this pool turn predicted-latency
                                              routing on? (reads the store read-only)
    latency-predictor training-server|prediction-server [--host H --port P]

Each subcommand imports its own modules only when it runs: in an installation that lacks
one, that subcommand alone says so in one line and exits 1.

status, retrains, predict, export and import take --pool NAME: the pool's routes
(/pools/NAME/...) instead of the default pool's.

Server URLs default to http://127.0.0.1:8000 (training) and :8001 (prediction). status,
predict, export and import exit 0 on success, 1 on an expected failure (a server down or
refusing, printed as one line), 2 on a usage error. Where the servers require a token, the
commands send LATENCY_API_TOKEN (or the file named by LATENCY_API_TOKEN_FILE) from the
environment, as the servers themselves read it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from latency_cli.commands import COMMANDS, MissingPiece


def build_parser(chosen: str | None) -> argparse.ArgumentParser:
    """The CLI's parser; only `chosen`'s subcommand imports its modules and declares its
    arguments. Abbreviated flags are refused: a script or a CronJob spelling --pod for
    --pods would break the day a flag sharing that prefix is added."""
    parser = argparse.ArgumentParser(
        prog="latency-predictor",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser(
        "demo", help="run both servers locally with a built-in load", allow_abbrev=False
    )
    demo.add_argument("--duration", type=float, default=60.0, help="seconds of load (60)")
    demo.add_argument("--rows-per-second", type=int, default=200)
    demo.add_argument("--var", default="./var", help="folder for the SQLite file and models")
    demo.add_argument("--training-port", type=int, default=8000)
    demo.add_argument("--prediction-port", type=int, default=8001)
    sub.add_parser("migrate", help="upgrade the store schema to the newest revision")
    _add_retrains(
        sub.add_parser("retrains", help="the last retrains with their metrics", allow_abbrev=False)
    )
    for name, command in COMMANDS.items():
        tool = sub.add_parser(name, help=command.help, description=command.help, allow_abbrev=False)
        if name == chosen:  # only the subcommand that runs imports its modules
            try:
                add_arguments, handler = command.loaded()
            except MissingPiece as exc:
                print(f"latency-predictor {name}: {exc}", file=sys.stderr)
                raise SystemExit(1) from None
            add_arguments(tool)
            tool.set_defaults(handler=handler, tool_parser=tool)
    sub.add_parser("training-server", help="run the training server", add_help=False)
    sub.add_parser("prediction-server", help="run the prediction server", add_help=False)
    return parser


def main(argv: Sequence[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    chosen = args[0] if args else None
    parser = build_parser(chosen)
    if chosen in ("training-server", "prediction-server"):
        _server(chosen, args[1:])
        return
    parsed = parser.parse_args(args)
    if getattr(parsed, "handler", None) is not None:
        raise SystemExit(_run_tool(parsed))
    if parsed.command == "demo":
        from latency_cli.demo import run_demo

        run_demo(parsed)
    elif parsed.command == "retrains":
        from latency_cli.retrains import show_retrains
        from shared.pools import pool_url

        url = pool_url(parsed.url.rstrip("/"), parsed.pool)
        raise SystemExit(show_retrains(url, parsed.limit, parsed.json))
    elif parsed.command == "migrate":
        from shared.settings import TrainingSettings
        from training_server.migrate import upgrade

        url = TrainingSettings().db_url
        upgrade(url)
        print(f"store at {url} is at the newest revision")


def _add_retrains(retrains: argparse.ArgumentParser) -> None:
    from latency_cli.calls import add_pool_argument

    retrains.add_argument("--url", default="http://127.0.0.1:8000", help="training server")
    retrains.add_argument("-n", "--limit", type=int, default=10)
    retrains.add_argument("--json", action="store_true", help="JSON instead of a table")
    add_pool_argument(retrains)


def _run_tool(parsed: argparse.Namespace) -> int:
    from latency_cli.calls import CliError, UsageError

    try:
        return int(parsed.handler(parsed))
    except UsageError as exc:
        parsed.tool_parser.error(str(exc))  # usage and message on stderr, exit 2
    except CliError as exc:
        print(f"latency-predictor {parsed.command}: {exc}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    return 1


def _server(name: str, argv: list[str]) -> None:
    """The same start-up as `python -m training_server` / `python -m prediction_server`."""
    if name == "training-server":
        from training_server.__main__ import main as training_main

        training_main(argv)
    else:
        from prediction_server.__main__ import main as prediction_main

        prediction_main(argv)
