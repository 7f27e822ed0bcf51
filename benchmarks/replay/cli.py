"""`python -m benchmarks.replay`: its arguments, one run per trace, the JSON or the tables."""

from __future__ import annotations

import argparse
import json
import math
from typing import Any

from benchmarks.common import git_state, say
from benchmarks.replay.drift import Shift, drifted, repeated, shift_of
from benchmarks.replay.drift_metrics import with_undrifted
from benchmarks.replay.inprocess import run_inprocess
from benchmarks.replay.offline import run_offline
from benchmarks.replay.online import run_online
from benchmarks.replay.rows import load_rows
from benchmarks.replay.tables import print_goals, print_offline, print_online
from shared.settings import Calibration, ModelType, ObjectiveType, TrainingSettings

DEFAULT_TRACES = ("sharegpt-h200", "chatbot-synthetic-h200")
MODES = ("online", "offline", "inprocess", "offline-inprocess")


def _add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    """What is replayed and on which clock."""
    parser.add_argument(
        "--trace",
        action="append",
        metavar="NAME_OR_PATH",
        help=f"repeatable; default: {' and '.join(DEFAULT_TRACES)}",
    )
    parser.add_argument("--mode", default="online", choices=MODES)
    parser.add_argument(
        "--rows-per-batch",
        type=int,
        default=50,
        help="rows arriving per simulated second (default 50)",
    )
    parser.add_argument("--batch-seconds", type=float, default=1.0)
    parser.add_argument(
        "--speedup",
        type=float,
        default=1.0,
        help="wall time per batch = batch-seconds / speedup (default 1: ~70 s per trace)",
    )
    parser.add_argument(
        "--retrain-interval",
        type=float,
        default=10.0,
        help="LATENCY_RETRAINING_INTERVAL_SEC of the servers (default 10, production's)",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        metavar="N",
        help="online/inprocess: replay the trace's rows N times in a row (default 1)",
    )
    parser.add_argument(
        "--drift",
        type=float,
        metavar="FACTOR",
        help="online/inprocess: from the halfway row of the replay on, every actual times "
        "FACTOR (features unchanged); scores how the p90 follows (default: no drift)",
    )
    parser.add_argument("--warmup-batches", type=int, default=2)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="wall-time cap of one trace's online replay (default 600)",
    )


def _add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """The trainer's settings under test, and the seeds."""
    parser.add_argument("--model-type", choices=[m.value for m in ModelType])
    parser.add_argument("--objective", choices=[o.value for o in ObjectiveType])
    parser.add_argument(
        "--calibration",
        choices=[c.value for c in Calibration],
        help="LATENCY_CALIBRATION of the servers (default: theirs, adaptive)",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--seeds",
        type=int,
        default=1,
        help="offline: seeds S..S+N-1; online: N runs on fresh servers; "
        "inprocess: held-out draws S..S+N-1",
    )


def _add_output_arguments(parser: argparse.ArgumentParser) -> None:
    """Running servers to use instead of fresh ones, and what is printed."""
    parser.add_argument("--training-url")
    parser.add_argument("--prediction-url")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--dump-rows",
        metavar="PATH",
        help="online: append every scored row (actual, served, naive) as JSON lines",
    )
    parser.add_argument("--no-progress", action="store_true")


def _check_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if bool(args.training_url) != bool(args.prediction_url):
        parser.error("--training-url and --prediction-url go together")
    if args.training_url and (
        args.mode != "online" or not args.trace or len(args.trace) != 1 or args.seeds != 1
    ):
        parser.error("running servers: online mode, exactly one --trace and one run")
    for name in ("rows_per_batch", "windows", "seeds", "repeat"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.drift is not None and not (math.isfinite(args.drift) and args.drift > 0):
        parser.error(f"--drift must be a positive factor, not {args.drift:g}")
    if args.mode.startswith("offline") and (args.repeat > 1 or args.drift is not None):
        parser.error("--repeat and --drift are for the online and inprocess modes")
    if args.speedup <= 0 or args.batch_seconds <= 0 or args.retrain_interval <= 0:
        parser.error("--speedup, --batch-seconds and --retrain-interval must be positive")


def parse_args(argv: list[str] | None = None, description: str = "") -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.replay", description=description)
    _add_protocol_arguments(parser)
    _add_model_arguments(parser)
    _add_output_arguments(parser)
    args = parser.parse_args(argv)
    _check_args(parser, args)
    return args


def settings_of(args: argparse.Namespace) -> TrainingSettings:
    """The trainer's settings: the environment's, then the flags given."""
    overrides: dict[str, Any] = {}
    for flag, field in (
        ("model_type", "model_type"),
        ("objective", "objective_type"),
        ("calibration", "calibration"),
    ):
        if getattr(args, flag):
            overrides[field] = getattr(args, flag)
    return TrainingSettings(**overrides)


def replay_rows(
    name: str, rows: list[dict[str, Any]], args: argparse.Namespace
) -> tuple[str, list[dict[str, Any]], Shift | None]:
    """The rows replayed (--repeat, --drift), the name they are reported under, the shift."""
    if args.repeat == 1 and args.drift is None:
        return name, rows, None
    rows = repeated(rows, args.repeat)
    shift = shift_of(len(rows), args.drift, args.rows_per_batch, args.batch_seconds)
    name += f" x{args.repeat}"
    if shift is not None:
        rows = drifted(rows, shift.factor)
        name += f", actuals x{shift.factor:g} from row {shift.row}"
    return name, rows, shift


def run_trace(
    name: str,
    rows: list[dict[str, Any]],
    args: argparse.Namespace,
    settings: TrainingSettings,
    shift: Shift | None = None,
    undrifted: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """Every run of one trace; in process, a drift replay is run again on `undrifted` (the
    same rows without the drift) for each window's coverage without it."""
    if args.mode in ("offline", "offline-inprocess"):
        result = run_offline(name, rows, args, settings, http=args.mode == "offline")
        if not args.json:
            print_offline(result)
        return [result]
    results = []
    for run in range(args.seeds):
        if args.mode == "online":
            result = run_online(name, rows, args, settings.quantile_alpha, shift)
        else:
            seeded = argparse.Namespace(**{**vars(args), "seed": args.seed + run})
            result = run_inprocess(name, rows, seeded, settings, shift)
            if shift is not None and undrifted is not None:
                same = Shift(1.0, shift.row, shift.seconds)
                baseline = run_inprocess(name, undrifted, seeded, settings, same)
                for target, summary in result["targets"].items():
                    with_undrifted(summary["drift"], baseline["targets"][target]["drift"])
        result["run"] = run + 1
        if not args.json:
            print_online(result, args)
        results.append(result)
    return results


def print_json(
    results: list[dict[str, Any]], args: argparse.Namespace, settings: TrainingSettings
) -> None:
    config = {k: v for k, v in vars(args).items() if k not in ("json", "no_progress")}
    say(
        json.dumps(
            {
                "mode": args.mode,
                "quantile": settings.quantile_alpha,
                "code": git_state(),
                "model_type": settings.model_type.value,
                "objective": settings.objective_type.value,
                "calibration": settings.calibration.value,
                "config": config,
                "traces": results,
            },
            indent=2,
        )
    )


def main(argv: list[str] | None = None, description: str = "") -> None:
    args = parse_args(argv, description)
    settings = settings_of(args)
    results = []
    for trace, loaded in (load_rows(spec) for spec in (args.trace or DEFAULT_TRACES)):
        name, rows, shift = replay_rows(trace, loaded, args)
        in_process_drift = shift is not None and args.mode == "inprocess"
        undrifted = repeated(loaded, args.repeat) if in_process_drift else None
        results += run_trace(name, rows, args, settings, shift, undrifted)
    if args.json:
        print_json(results, args, settings)
    else:
        say(f"\ncode {git_state()}")
        print_goals(results, args)
