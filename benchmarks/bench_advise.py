"""`latency-predictor advise` on real stores, against what `simulate` measures directly.

    .venv/bin/python -m benchmarks.bench_advise [--parts traces,workloads,timing]
        [--pods 4] [--hardware h200|h200:2,b200:2] [--workloads chat,mixed] [--seeds 0,1,2]
        [--sim-duration 300] [--core 0]

- traces: each shipped H200 trace (benchmarks/traces/, read through poolsim.reconstruct's
  loader) becomes a store through a real trainer (SQLite, /add_training_data_bulk), its
  rows given timestamps evenly over 12 minutes in file order; advise --pods 2 (the two
  decode replicas it was recorded on).
- workloads: the simulator's `chat` and `mixed` workloads on --pods pods for 11 minutes,
  routed by the heuristic; every completed request's training rows (as the EPP sends
  them), stamped with its arrival, fill a store; advise on it; then `simulate` on the same
  workload, pods, policies and seeds (--sim-duration s), and both expected changes (the
  best predictor policy against the best heuristic, advisor.verdict's rule) side by side.
  --hardware h200:2,b200:2 serves them on a mixed pool (poolsim.hardware.parse_hardware;
  --pods then defaults to the counts' sum): the rows carry each pod's `pod_class`, advise
  gets only --pods (it reads the classes from the rows), and `simulate` gets the same
  --hardware and runs token-load-per-class too, as advise adds it for a mixed pool.
- timing: a 10,000-row store (the `mixed` rows, sampled over its 11 minutes) answered by
  advise pinned to one core (taskset -c --core, which its servers inherit); goal <= 120 s.

Only 127.0.0.1; every server started here is ended by its PID; loops are bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from advisor.predictor import Recording
from advisor.simulate import DEFAULT_POLICIES, PolicyRuns, SeedFigures, Simulation
from advisor.verdict import Comparison, compare
from benchmarks.common import say, simulate_command
from devkit.stores import fill_through_trainer
from poolsim.engine import Engine
from poolsim.hardware import Hardware, HardwareSpecError, is_mixed, parse_hardware
from poolsim.policies import make_policy
from poolsim.reconstruct import TRACES, load_rows
from poolsim.workloads import generate

START = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SLOS = {"chat": ("300", "40"), "mixed": ("1000", "60")}  # chat's own; mixed: its medium size
WORKLOAD_S = 660.0  # 11 minutes of arrivals: past advise's 10-minute minimum
TIMING_ROWS = 10_000
Row = dict[str, Any]


def trace_store_rows(name: str, minutes: float = 12.0) -> list[Row]:
    rows = load_rows(name)
    step = minutes * 60.0 / max(len(rows) - 1, 1)
    return [
        {**row, "timestamp": (START + timedelta(seconds=i * step)).isoformat()}
        for i, row in enumerate(rows)
    ]


def workload_rows(workload: str, pool: list[Hardware], seed: int = 0) -> list[Row]:
    """The training rows of a heuristic-routed run on `pool` (each pod's class), each
    stamped with its arrival; a mixed pool's rows carry pod_class (advisor.predictor)."""
    recording = Recording(make_policy("heuristic", seed))
    requests = generate(workload, len(pool), WORKLOAD_S, seed)
    asyncio.run(Engine(requests, len(pool), pool, recording, regret=False).run())
    return [
        {**row, "timestamp": (START + timedelta(seconds=t)).isoformat()}
        for row, t in sorted(
            zip(recording.rows, recording.arrival_s, strict=True), key=lambda pair: pair[1]
        )
    ]


def run_json(command: list[str], path: Path, timeout: float) -> tuple[dict[str, Any], float]:
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command[:4])}: exit {done.returncode}: {done.stderr[-800:]}")
    return json.loads(path.read_text()), time.perf_counter() - started


def advise(url: str, pods: int, seeds: str, folder: Path, extra: list[str]) -> tuple[Any, float]:
    path = folder / "advice.json"
    command = [
        sys.executable,
        "-m",
        "latency_cli",
        "advise",
        "--db",
        url,
        "--pods",
        str(pods),
        "--seeds",
        seeds,
        "--json",
        str(path),
        "--no-progress",
        *extra,
    ]
    return run_json(command, path, timeout=1800)


@dataclass(frozen=True)
class Answer:
    """What the table shows of one advise (or of simulate, judged by the same rule)."""

    verdict: str
    ttft: Comparison | None
    slo: Comparison | None


def _comparison(doc: dict[str, Any] | None) -> Comparison | None:
    if doc is None:
        return None
    from advisor.verdict import Range

    fields = {
        **doc,
        "baseline_range": Range(**doc["baseline_range"]),
        "predictor_range": Range(**doc["predictor_range"]),
    }
    return Comparison(**fields)


def advice_answer(doc: dict[str, Any]) -> Answer:
    changes = doc["expected_change"]
    return Answer(
        doc["verdict"], _comparison(changes["ttft_p90"]), _comparison(changes["slo_attainment"])
    )


def simulate_answer(per_seed: list[dict[str, Any]]) -> Answer:
    """advisor.verdict's rule on `simulate`'s own figures (every request, cold start)."""
    names = list(per_seed[0]["policies"])
    runs = []
    for name in names:
        seeds = tuple(
            SeedFigures(
                doc["seed"],
                m["requests"],
                m["unfinished"],
                m["ttft_ms"]["p50"],
                m["ttft_ms"]["p90"],
                m["tpot_ms"]["p90"],
                m["slo_attainment"],
                m["wall_s"],
            )
            for doc in per_seed
            for m in (doc["policies"][name],)
        )
        runs.append(PolicyRuns(name, seeds, ()))
    sim = Simulation(tuple(runs), (), 0, 0.0)
    ttft, slo = compare(sim, "ttft_p90"), compare(sim, "slo_attainment")
    win = any(c is not None and c.win for c in (ttft, slo))
    return Answer("enable" if win else "little-gain", ttft, slo)


def policies(pool: list[Hardware]) -> str:
    """advise's default policies on `pool`: token-load-per-class after token-load when mixed."""
    names = list(DEFAULT_POLICIES)
    if is_mixed(pool):
        names.insert(names.index("token-load") + 1, "token-load-per-class")
    return ",".join(names)


def simulate(
    workload: str, args: argparse.Namespace, seeds: list[int], folder: Path
) -> tuple[Answer, float]:
    docs, wall = [], 0.0
    for seed in seeds:
        path = folder / f"simulate-{workload}-{seed}.json"
        command = simulate_command(
            workload,
            seed,
            args.sim_duration,
            policies(args.pool),
            path,
            *("--pods", str(args.pods), "--hardware", args.hardware, "--no-regret"),
        )
        doc, seconds = run_json(command, path, timeout=3600)
        docs.append(doc)
        wall += seconds
        say(f"  simulate {workload} seed {seed}: {seconds:.0f} s")
    return simulate_answer(docs), wall


def _cmp(c: Comparison | None, points: bool) -> str:
    if c is None:
        return "-"
    change = f"{c.change * 100:+.1f} pt" if points else f"{c.change:+.1%}"
    pred, base = c.predictor_range.mean, c.baseline_range.mean
    values = f"{pred:.1%} vs {base:.1%}" if points else f"{pred:,.0f} vs {base:,.0f} ms"
    return f"{c.predictor} vs {c.baseline}: {values}, {change}{' (win)' if c.win else ''}"


def answer_row(label: str, source: str, answer: Answer, extra: str) -> str:
    return (
        f"| {label} | {source} | {answer.verdict} | {_cmp(answer.ttft, False)} "
        f"| {_cmp(answer.slo, True)} | {extra} |"
    )


def fit_text(doc: dict[str, Any]) -> str:
    fit = doc["fit_error"]
    if not fit:
        return "-"
    judged = [c for c in fit["cells"] if c["judged"]]
    worst = max(judged, key=lambda c: abs(c["error"])) if judged else None
    shown = f"worst {worst['target']} {worst['band']} {worst['error']:+.0%}" if worst else "-"
    return f"{shown}, {len(fit['off'])} cells off"


def classes_text(doc: dict[str, Any]) -> str:
    """The pool advise rebuilt from the rows' classes, with each class's speed factors."""
    classes = doc.get("classes")
    if not classes or not classes["from_rows"]:
        return ""
    each = ", ".join(
        f"{c['label']} x{c['speeds']['compute']:.2f}/x{c['speeds']['memory']:.2f}"
        for c in classes["per_class"]
    )
    return f"; pool {classes['pool']} (compute/memory: {each})"


HEADER = [
    "| store | source | verdict | TTFT p90: best predictor vs best heuristic | SLO attainment"
    " | notes |",
    "|---|---|---|---|---|---|",
]


def part_traces(args: argparse.Namespace, folder: Path) -> list[str]:
    lines = []
    for name in TRACES:
        url = f"sqlite:///{folder / name}.db"
        fill_through_trainer(url, trace_store_rows(name), folder / name)
        doc, seconds = advise(url, 2, args.seeds, folder / name, [])
        notes = (
            f"{doc['rows']:,} rows, {doc['minutes']:.1f} min, confidence "
            f"{doc['confidence']}, fit {fit_text(doc)}, {seconds:.0f} s"
        )
        lines.append(answer_row(name, "advise", advice_answer(doc), notes))
        say(lines[-1])
    return lines


def part_workloads(args: argparse.Namespace, folder: Path) -> list[str]:
    lines = []
    seeds = [int(s) for s in args.seeds.split(",")]
    for workload in args.workloads.split(","):
        url = f"sqlite:///{folder / workload}.db"
        rows = workload_rows(workload, args.pool)
        fill_through_trainer(url, rows, folder / workload)
        ttft_slo, tpot_slo = SLOS[workload]
        extra = ["--slo-ttft-ms", ttft_slo, "--slo-tpot-ms", tpot_slo]
        doc, seconds = advise(url, args.pods, args.seeds, folder / workload, extra)
        notes = (
            f"{doc['rows']:,} rows, confidence {doc['confidence']}, fit "
            f"{fit_text(doc)}{classes_text(doc)}, {seconds:.0f} s"
        )
        lines.append(answer_row(workload, "advise", advice_answer(doc), notes))
        say(lines[-1])
        answer, wall = simulate(workload, args, seeds, folder)
        notes = f"{args.sim_duration:g} s x {len(seeds)} seeds, cold start, {wall:.0f} s"
        lines.append(answer_row(workload, "simulate", answer, notes))
        say(lines[-1])
    return lines


def part_timing(args: argparse.Namespace, folder: Path) -> list[str]:
    every = workload_rows("mixed", args.pool)  # 11 minutes; keep 10,000 rows spread over them
    keep = sorted(random.Random(0).sample(range(len(every)), min(TIMING_ROWS, len(every))))
    rows = [every[i] for i in keep]
    url = f"sqlite:///{folder / 'timing'}.db"
    fill_through_trainer(url, rows, folder / "timing")
    load = os.getloadavg()[0]
    pinned = [
        "taskset",
        "-c",
        str(args.core),
        sys.executable,
        "-m",
        "latency_cli",
        "advise",
        "--db",
        url,
        "--pods",
        str(args.pods),
        "--json",
        str(folder / "timing.json"),
        "--no-progress",
        "--slo-ttft-ms",
        "1000",
        "--slo-tpot-ms",
        "60",
    ]
    doc, seconds = run_json(pinned, folder / "timing.json", timeout=1800)
    line = (
        f"timing: {doc['rows']:,} rows, advise pinned to CPU {args.core}: {seconds:.1f} s "
        f"wall ({doc['elapsed_s']['total_s']:.1f} s answered; simulation "
        f"{doc['elapsed_s']['simulate_s']:.1f} s), load average before {load:.2f}; goal "
        f"<= 120 s: {'met' if seconds <= 120 else 'missed'}"
    )
    say(line)
    return [line]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.bench_advise")
    parser.add_argument("--parts", default="traces,workloads,timing")
    parser.add_argument("--pods", type=int, default=None, help="4; with counts, their sum")
    parser.add_argument("--hardware", default="h200", help="h200, or a mixed pool h200:2,b200:2")
    parser.add_argument("--workloads", default="chat,mixed")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sim-duration", type=float, default=300.0)
    parser.add_argument("--core", type=int, default=0)
    args = parser.parse_args(argv)
    try:
        args.pool = parse_hardware(args.hardware, args.pods, default_pods=4)
    except HardwareSpecError as exc:
        parser.error(str(exc))
    args.pods = len(args.pool)
    parts = {"traces": part_traces, "workloads": part_workloads, "timing": part_timing}
    lines: list[str] = []
    with tempfile.TemporaryDirectory(prefix="bench-advise-") as tmp:
        for name in args.parts.split(","):
            say(f"== {name}")
            lines += parts[name](args, Path(tmp))
    say("\n".join(["", *HEADER, *[line for line in lines if line.startswith("|")]]))
    say("\n".join(line for line in lines if not line.startswith("|")))


if __name__ == "__main__":
    main()
