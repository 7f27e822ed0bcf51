"""`latency-predictor simulate`: compare routing policies on a simulated pool of pods.

    latency-predictor simulate --workload chat|prefix|mixed|ramp|multimodal|FILE.jsonl [--pods 8]
        [--duration 600] [--policies random,round-robin,least-requests,heuristic,oracle]
        [--seed 0] [--hardware h200|b200|h200:4,b200:4] [--join CLASS:COUNT@SECONDS ...]
        [--slowdown CLASS:FACTOR@SECONDS ...] [--json OUT] [--plots DIR] [--speedup 5]
        [--training-url URL --prediction-url URL[,URL...]] [--prediction-servers 1]
        [--max-model-age 12] [--no-regret] [--roles prefill:2,decode:6 [--pd-threshold 16]]

Every policy serves the same requests (the workload's seed). Every pick is judged by its
decision regret (the chosen pod's look-ahead TTFT minus the least any pod would have
given, poolsim.regret) unless --no-regret skips those look-aheads. Prints a Markdown table;
--json writes every figure, --plots the TTFT CDF, per-pod share (overall and per minute),
regret-per-minute and per-class share (per 30 s) PNGs (matplotlib).

--hardware: one class (`h200`: every pod of it, --pods of them, 8 by default) or a mixed pool
`h200:4,b200:4` (that many pods of each class, in that order; --pods then defaults to the
counts' sum and, when given, must equal it). In a mixed pool `predicted-latency` and
`latency-first` send each pod's class as our `pod_class` field (docs/api.md 2.1), their
`-noclass` variants send none (as llm-d's EPP), and the report adds a table per class
(JSON: `policies[NAME]["by_pod_class"][CLASS]`, present for every pool).

A pool that changes during the run (poolsim.pool_changes), both flags repeatable:
`--join b200:2@120` adds 2 b200 pods at simulated second 120, as an autoscaler would (no
policy, nor the oracle or the regret meter, sees them before; after, they are ordinary,
empty pods with a cold prefix cache; their indices follow the initial pods', which
--pods/--hardware describe); `--slowdown h200:1.5@180` makes every h200 pod's steps 1.5x
slower from second 180 (a noisy neighbour; the class keeps its name, so only a model
learning from measured rows can follow). The JSON echoes them (`pool_changes`: `joins` and
`slowdowns`, each with its pods' indices; `pod_classes` lists every pod, joining ones
included) and has, per policy, each class's share of the requests per 30 s of arrival
(`policies[NAME]["class_share_over_time"]`, also `class_share_over_time.png`).
A workload whose requests carry images (`multimodal`, poolsim.encoder) sets
`PolicyOptions.multimodal`: the predicted policies' servers run with
LATENCY_ENABLE_ENCODER_FEATURES=true and token-load-per-class takes llm-d's multimodal
affinity settings; the report adds the encoder cache's figures per policy.
--roles prefill:2,decode:6 makes a prefill/decode disaggregated pool (poolsim.roles,
poolsim.command_pd); the JSON adds `pd` and per policy `by_role`, the report a table.
Exit 0 on success, 1 when a workload file cannot be used, 2 on a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from poolsim import command_pd
from poolsim.hardware import (
    Hardware,
    HardwareSpecError,
    parse_hardware,
    pool_label,
)
from poolsim.policies import FACTORIES, check_name, make_policy
from poolsim.policy_api import PolicyOptions
from poolsim.pool_changes import PoolChangeError, parse_pool_changes
from poolsim.replay import ReplayError, load_replay
from poolsim.request import Request
from poolsim.roles import RolesSpecError
from poolsim.workloads import WORKLOADS, generate

if TYPE_CHECKING:  # the heavier modules load when the command runs, not with the CLI
    from poolsim.engine import Engine, RunResult
    from poolsim.metrics import PolicyMetrics


class UsageProblem(Exception):
    pass


def _out(text: str) -> None:
    print(text, flush=True)  # noqa: T201 (command output)


def _err(text: str) -> None:
    print(f"latency-predictor simulate: {text}", file=sys.stderr)  # noqa: T201


def _requests(args: argparse.Namespace) -> list[Request]:
    if args.workload in WORKLOADS:
        return generate(args.workload, args.pods, args.duration, args.seed, args.rate_scale)
    path = Path(args.workload)
    if not path.is_file():
        raise UsageProblem(
            f"--workload: {args.workload!r} is neither a workload "
            f"({', '.join(WORKLOADS)}) nor a file"
        )
    kept = [r for r in load_replay(path) if r.arrival_s < args.duration]
    if not kept:
        raise ReplayError(f"{path}: no request arrives before --duration {args.duration:g} s")
    return kept


def resolve_pool(args: argparse.Namespace) -> list[Hardware]:
    """Each pod's class from --hardware and --pods (poolsim.hardware.parse_hardware); sets
    args.pods to the pool's size and args.changes to the --join and --slowdown changes
    (poolsim.pool_changes), and args.pd to the P/D settings of --roles (None without).
    UsageProblem when they do not name a pool or a change."""
    args.pd = None
    try:
        if getattr(args, "roles", None):
            pool, args.pd = command_pd.pd_pool(args)
        else:
            pool = parse_hardware(args.hardware, args.pods)
    except (HardwareSpecError, RolesSpecError, command_pd.PdUsageError) as exc:
        raise UsageProblem(str(exc)) from None
    args.pods = len(pool)
    try:
        args.changes = parse_pool_changes(
            getattr(args, "join", None) or [], getattr(args, "slowdown", None) or [], pool
        )
    except PoolChangeError as exc:
        raise UsageProblem(str(exc)) from None
    return pool


def _check(args: argparse.Namespace) -> list[str]:
    args.pool = resolve_pool(args)
    names = [name.strip() for name in args.policies.split(",") if name.strip()]
    if not names:
        raise UsageProblem(f"--policies: none given; known: {', '.join(FACTORIES)}")
    for name in names:
        try:
            check_name(name)
        except ValueError as exc:
            raise UsageProblem(f"--policies: {exc}") from None
    if args.max_model_age < 0:
        raise UsageProblem("--max-model-age must be >= 0")
    if min(args.pods, args.duration, args.speedup, args.rate_scale, args.prediction_servers) <= 0:
        raise UsageProblem(
            "--pods, --duration, --speedup, --rate-scale and --prediction-servers must be positive"
        )
    if args.training_url and not args.prediction_url:
        raise UsageProblem("--training-url needs --prediction-url")
    from poolsim.report import INSTALL_HINT, matplotlib_available

    if args.plots and not matplotlib_available():
        raise UsageProblem(INSTALL_HINT)
    return names


def _run_one(name: str, requests: list[Request], args: argparse.Namespace) -> RunResult:
    from poolsim.engine import Engine
    from poolsim.progress import ProgressBar

    policy = make_policy(name, args.seed, options=_options(args, requests))
    speedup = args.speedup if policy.paced else None
    last = max(r.arrival_s for r in requests)
    bar = None if args.no_progress else ProgressBar(name, last)
    engine = Engine(
        requests,
        args.pods,
        args.pool,
        policy,
        speedup=speedup,
        progress=bar,
        regret=not args.no_regret,
        changes=args.changes,
        pd=args.pd,
    )
    result = asyncio.run(_until_sigterm(engine))
    if bar is not None:
        bar.close(min(result.sim_end_s, last))
    return result


def _options(args: argparse.Namespace, requests: list[Request]) -> PolicyOptions:
    urls = tuple(u.strip() for u in (args.prediction_url or "").split(",") if u.strip())
    return PolicyOptions(
        seed=args.seed,
        speedup=args.speedup,
        training_url=args.training_url,
        prediction_urls=urls,
        prediction_servers=args.prediction_servers,
        max_model_age_s=args.max_model_age,
        multimodal=any(request.image_ids for request in requests),
        pd_threshold=args.pd_threshold,
    )


def _predictor_note(
    args: argparse.Namespace, names: list[str], multimodal: bool = False
) -> str | None:
    """What the predicted policies will talk to, with the scaled time constants."""
    predicted = [n for n in names if n.startswith(("predicted-latency", "latency-first"))]
    if not predicted:
        return None
    who = ", ".join(predicted)
    if args.prediction_url:
        sink = args.training_url or "nowhere (no --training-url)"
        return f"{who}: predictor at {args.prediction_url}, training rows to {sink}"
    from poolsim.predictor_servers import scaled_env

    env = scaled_env(Path("."), args.speedup, multimodal)
    keys = (
        "LATENCY_RETRAINING_INTERVAL_SEC",
        "LATENCY_CALIBRATION_INTERVAL_SEC",
        "MODEL_SYNC_INTERVAL_SEC",
    )
    encoder = " and LATENCY_ENABLE_ENCODER_FEATURES=true (requests with images)"
    return (
        f"{who}: each with our training server (SQLite in a temp dir) and "
        f"{args.prediction_servers} prediction server(s), started for the run: "
        + ", ".join(f"{key}={env[key]}" for key in keys)
        + f" (10 s, 1 s and 1 s divided by the speedup {args.speedup:g})"
        + (encoder if multimodal else "")
    )


async def _until_sigterm(engine: Engine) -> RunResult:
    """The run, cancelled by SIGTERM: its `finally` closes the policy, which ends the
    servers a predicted policy started (by PID) before the process exits."""
    loop = asyncio.get_running_loop()
    task = asyncio.current_task()
    assert task is not None
    loop.add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        return await engine.run()
    finally:
        loop.remove_signal_handler(signal.SIGTERM)


def run(args: argparse.Namespace) -> int:
    try:
        names = _check(args)
        requests = _requests(args)
    except UsageProblem as exc:
        _err(str(exc))
        return 2
    except (ReplayError, OSError, ValueError) as exc:
        _err(str(exc))
        return 1
    _out(
        f"workload {args.workload}: {len(requests)} requests over {args.duration:g} s, "
        f"{args.pods} pods ({pool_label(args.pool)}), seed {args.seed}; policies without a real "
        f"predictor run as fast as possible, those with one at x{args.speedup:g} "
        f"(the predictor's retrain interval divided by it)"
    )
    if args.changes.describe():
        _out(f"pool changes: {args.changes.describe()}")
    if args.pd is not None:
        _out(command_pd.describe(args.pd))
    note = _predictor_note(args, names, any(request.image_ids for request in requests))
    if note:
        _out(note)
    started = time.perf_counter()
    try:
        results, ttfts, paced = _run_all(names, requests, args)
    except (ValueError, RuntimeError, TimeoutError) as exc:  # incl. a server that failed
        _err(str(exc))
        return 1
    except asyncio.CancelledError:
        _err("terminated (SIGTERM); every server it started was stopped")
        return 143
    _report(args, len(requests), results, ttfts, paced, time.perf_counter() - started)
    return 0


def _run_all(
    names: list[str], requests: list[Request], args: argparse.Namespace
) -> tuple[dict[str, PolicyMetrics], dict[str, list[float]], list[str]]:
    from poolsim.metrics import summarize

    results: dict[str, PolicyMetrics] = {}
    ttfts: dict[str, list[float]] = {}
    paced: list[str] = []
    for name in names:
        result = _run_one(name, requests, args)
        results[name] = summarize(result)
        ttfts[name] = [c.ttft_ms for c in result.completions]
        pace = "as fast as possible" if result.speedup is None else f"paced x{result.speedup:g}"
        if result.speedup is not None:
            paced.append(name)
        _out(
            f"{name}: {result.sim_end_s:.0f} s simulated in {result.wall_s:.1f} s wall "
            f"(x{result.sim_end_s / max(result.wall_s, 1e-9):.0f}, {pace})"
        )
    return results, ttfts, paced


def _report(
    args: argparse.Namespace,
    requests: int,
    results: dict[str, PolicyMetrics],
    ttfts: dict[str, list[float]],
    paced: list[str],
    wall: float,
) -> None:
    from poolsim.report import (
        encoder_table,
        markdown_table,
        pd_role_table,
        pod_class_table,
        served_table,
        write_plots,
    )

    _out(markdown_table(results))
    encoder = encoder_table(results)
    if encoder:
        _out("\nEncoder caches (image tokens found at admission, encoder time per pod):\n")
        _out(encoder)
    served = served_table(results)
    if served:
        _out("\nServed p90s of the predicted policies (coverage and pinball, q = 0.9):\n")
        _out(served)
    per_class = pod_class_table(results)
    if per_class:
        _out(f"\nPer hardware class ({pool_label(args.changes.pool(args.pool))}):\n")
        _out(per_class)
    per_role = pd_role_table(results)
    if per_role:
        _out("\nPer P/D role (requests that touched a pod of the role; p90s):\n")
        _out(per_role)
    if args.plots:
        plots = write_plots(ttfts, results, Path(args.plots), str(args.workload), args.changes)
        for path in plots:
            _out(f"plot: {path}")
    if args.json:
        _write_json(Path(args.json), args, requests, results, wall, paced)
        _out(f"json: {args.json}")


def _write_json(
    path: Path,
    args: argparse.Namespace,
    requests: int,
    results: dict[str, PolicyMetrics],
    wall: float,
    paced: list[str],
) -> None:
    document: dict[str, Any] = {
        "workload": args.workload,
        "pods": args.pods,
        "duration_s": args.duration,
        "seed": args.seed,
        "hardware": pool_label(args.pool),
        "pod_classes": [hw.name for hw in args.changes.pool(args.pool)],
        "requests": requests,
        "speedup": args.speedup,
        "paced_policies": paced,
        "wall_s": wall,
        "policies": results,
        "pool_changes": args.changes.to_json(args.pool),
    }
    if args.pd is not None:
        document["pd"] = command_pd.to_json(args.pd)
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_suffix(path.suffix + ".tmp")
    temp.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    temp.replace(path)
