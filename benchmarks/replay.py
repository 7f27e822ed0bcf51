"""Replay recorded traces through the servers the way the EPP and the llm-d project use
them, score the p90 predictions, and judge issue 14's goals.

    .venv/bin/python -m benchmarks.replay [--trace NAME_OR_PATH ...]
        [--mode online|offline|inprocess|offline-inprocess] [--seeds N] [--seed S]
        [--rows-per-batch 50] [--batch-seconds 1] [--speedup 1] [--retrain-interval 10]
        [--windows 4] [--model-type xgboost|lightgbm] [--objective quantile|mean]
        [--calibration none|split|adaptive] [--json] [--training-url URL --prediction-url URL]

online (default): benchmarks/replay_online.py, real servers, rows in trace order; --seeds N
repeats the run N times on fresh servers. offline: benchmarks/replay_offline.py, the llm-d
project's 90/10 protocol over HTTP against fresh servers per seed (seeds S..S+N-1).
inprocess and offline-inprocess: the same two protocols in one process, for quick A/B.
Each mode prints its tables, then the goals of issue 14 with a measured reason for every
miss (benchmarks/replay_goals.py).

Talks only to 127.0.0.1; every loop is bounded in count and time; it ends the servers it
started, by PID.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from benchmarks.replay_goals import (
    OFFLINE_GOALS_HEADER,
    ONLINE_GOALS_HEADER,
    offline_goal_row,
    online_goal_row,
)
from benchmarks.replay_inprocess import run_inprocess
from benchmarks.replay_io import git_state, load_rows, say
from benchmarks.replay_metrics import HEADER, OFFLINE_HEADER, offline_row, online_table
from benchmarks.replay_offline import run_offline
from benchmarks.replay_online import run_online
from shared.settings import Calibration, ModelType, ObjectiveType, TrainingSettings

DEFAULT_TRACES = ("sharegpt-h200", "chatbot-synthetic-h200")
ONLINE_MODES = ("online", "inprocess")


def print_online(result: dict[str, Any], args: argparse.Namespace) -> None:
    if args.mode == "inprocess":
        say(
            f"\n## in-process replay: {result['trace']} ({result['rows']} rows, "
            f"{result['batches']} batches of {args.rows_per_batch}, retrain clock every "
            f"{args.retrain_interval / args.batch_seconds:g} batches, held-out seed "
            f"{result['seed']})"
        )
    else:
        say(
            f"\n## online replay: {result['trace']} ({result['rows']} rows, "
            f"{result['batches']} batches of {args.rows_per_batch}, one every "
            f"{args.batch_seconds / args.speedup:g} s; retrain every "
            f"{args.retrain_interval:g} s = ~{result['rows_per_retrain_interval']:.0f} rows)"
        )
        first = result["first_model_batch"]
        say(
            f"wall {result['wall_seconds']:.1f} s, {result['retrains_ok']} retrains "
            f"(mean {result['retrain_seconds_mean'] or 0:.2f} s), "
            f"{result['model_versions_served']} model versions served, first trained model "
            f"at batch {'-' if first is None else first + 1}"
            f"{'; TRUNCATED by --max-seconds' if result['truncated'] else ''}"
        )
        if any(result["model_choices"].values()):
            say(f"model chosen per retrain: {result['model_choices']}")
    say(
        f"scored: rows from batch {args.warmup_batches + 1} on, each for the target it "
        f"measures; naive = running p90 of the actuals sent before the batch"
    )
    say(HEADER)
    for target, summary in result["targets"].items():
        for line in online_table(target, summary):
            say(line)


def print_offline(result: dict[str, Any]) -> None:
    seeds = result["seeds"]
    how = "over HTTP, fresh servers per seed" if result["over_http"] else "in process"
    say(
        f"\n## offline 90/10 ({how}): {result['trace']} ({result['rows']} rows, seeds "
        f"{seeds[0]}..{seeds[-1]}, mean±std over seeds; naive = p90 of the train actuals)"
    )
    say(OFFLINE_HEADER)
    for target, agg in result["targets"].items():
        say(offline_row(target, agg))
    for target, agg in result["targets"].items():
        chosen = [s.get("model_choice") for s in agg["per_seed"] if s.get("model_choice")]
        if chosen:
            say(f"{target} model chosen per seed: {', '.join(chosen)}")


def print_goals(results: list[dict[str, Any]], args: argparse.Namespace) -> None:
    online = args.mode in ONLINE_MODES
    say(
        f"\n## goals of issue 14 ({args.mode}"
        f"{', one row per run' if online and args.seeds > 1 else ''})"
    )
    say(ONLINE_GOALS_HEADER if online else OFFLINE_GOALS_HEADER)
    for result in results:
        for target, part in result["targets"].items():
            say(
                online_goal_row(result["trace"], target, part)
                if online
                else offline_goal_row(result["trace"], target, part)
            )


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--trace",
        action="append",
        metavar="NAME_OR_PATH",
        help=f"repeatable; default: {' and '.join(DEFAULT_TRACES)}",
    )
    parser.add_argument(
        "--mode", default="online", choices=("online", "offline", "inprocess", "offline-inprocess")
    )
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
    parser.add_argument("--warmup-batches", type=int, default=2)
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument(
        "--max-seconds",
        type=float,
        default=600.0,
        help="wall-time cap of one trace's online replay (default 600)",
    )
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
    parser.add_argument("--training-url")
    parser.add_argument("--prediction-url")
    parser.add_argument("--json", action="store_true", help="one JSON object on stdout")
    parser.add_argument(
        "--dump-rows",
        metavar="PATH",
        help="online: append every scored row (actual, served, naive) as JSON lines",
    )
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)
    if bool(args.training_url) != bool(args.prediction_url):
        parser.error("--training-url and --prediction-url go together")
    if args.training_url and (
        args.mode != "online" or not args.trace or len(args.trace) != 1 or args.seeds != 1
    ):
        parser.error("running servers: online mode, exactly one --trace and one run")
    for name in ("rows_per_batch", "windows", "seeds"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.speedup <= 0 or args.batch_seconds <= 0 or args.retrain_interval <= 0:
        parser.error("--speedup, --batch-seconds and --retrain-interval must be positive")
    return args


def run_trace(
    name: str, rows: list[dict[str, Any]], args: argparse.Namespace, settings: TrainingSettings
) -> list[dict[str, Any]]:
    if args.mode in ("offline", "offline-inprocess"):
        result = run_offline(name, rows, args, settings, http=args.mode == "offline")
        if not args.json:
            print_offline(result)
        return [result]
    results = []
    for run in range(args.seeds):
        if args.mode == "online":
            result = run_online(name, rows, args, settings.quantile_alpha)
        else:
            result = run_inprocess(
                name, rows, argparse.Namespace(**{**vars(args), "seed": args.seed + run}), settings
            )
        result["run"] = run + 1
        if not args.json:
            print_online(result, args)
        results.append(result)
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    overrides: dict[str, Any] = {}
    for flag, field in (
        ("model_type", "model_type"),
        ("objective", "objective_type"),
        ("calibration", "calibration"),
    ):
        if getattr(args, flag):
            overrides[field] = getattr(args, flag)
    settings = TrainingSettings(**overrides)  # environment, then the flags
    results = []
    for name, rows in (load_rows(spec) for spec in (args.trace or DEFAULT_TRACES)):
        results += run_trace(name, rows, args, settings)
    if args.json:
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
    else:
        say(f"\ncode {git_state()}")
        print_goals(results, args)


if __name__ == "__main__":
    main()
