"""`latency-predictor advise`: should this pool turn predicted-latency routing on?

    latency-predictor advise --db URL --pods N [--hours 6] [--slo-ttft-ms X --slo-tpot-ms Y]
        [--seeds 0,1,2] [--json OUT] [--plots DIR] [--hardware h200|h200:2,b200:2]

Reads the newest --hours of the store's rows read-only, profiles the traffic, checks the
simulator's pod model against the rows, rebuilds a workload of the same shape for a pool
of --pods pods and serves it under the heuristics, the predictor policies (our real
servers in the loop) and the oracle, then prints one screen: the figures per policy with
the seeds' range, the verdict (enable / little-gain / not-enough-data) with its confidence,
the expected change, the reason and the sidecars' cost. --json pointed at the trainer's
advice file (LATENCY_ADVICE_FILE) puts the answer on its dashboard (GET /advice). Rows that
name their hardware class (`pod_class`) make a pool of those classes, their speeds read
from the rows (advisor.classes); `--hardware CLASS:COUNT,...` sets the pods per class (and
--pods to their sum); `--hardware CLASS`, the class of rows that name none. Rows from both
prefill and decode pods (`pod_type`) make a prefill/decode pool, --pods split between the
roles by the load the rows imply, or as `--roles prefill:N,decode:M` says; pd-heuristic
joins the baselines (advisor.roles). `--pd-threshold` is the decider's. Exit 0
with an answer (also not-enough-data), 1 when the store cannot be read or a server fails,
2 on a usage error.
"""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING

from advisor.options import Options
from shared.advice_file import (
    POOL_PLACEHOLDER,
    as_template,
    is_per_pool,
    pool_file,
    template_problem,
)
from shared.pools import DEFAULT_POOL, PoolNameError, checked_pool_name

if TYPE_CHECKING:  # the heavy modules load when the command runs, not with the CLI
    from advisor.advise import Advised

HELP = "read a store's traffic and say whether predicted-latency routing would pay off"
DEFAULT_POLICIES = "heuristic,token-load,round-robin,predicted-latency,latency-first,oracle"
NO_EXPORT = (
    "--training-url: the training server's HTTP API has no route that exports stored rows "
    "(it serves models, status and retrains), so advise reads the store itself: pass "
    "--db with the trainer's LATENCY_DB_URL"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--db", metavar="URL", help="the trainer's store (LATENCY_DB_URL)")
    source.add_argument("--training-url", metavar="URL", help="not supported: " + NO_EXPORT[16:])
    parser.add_argument(
        "--pods",
        type=int,
        help="pods in the pool to advise on (required; with --hardware counts, their sum)",
    )
    parser.add_argument(
        "--pool",
        type=pool_name,
        metavar="NAME",
        help="only this pool's rows (every pool's by default); {pool} in --json is its name",
    )
    parser.add_argument("--hours", type=float, default=6.0, help="newest hours of rows (6)")
    parser.add_argument("--slo-ttft-ms", type=float, help="TTFT SLO per request (none)")
    parser.add_argument("--slo-tpot-ms", type=float, help="TPOT SLO per request (none)")
    parser.add_argument("--seeds", default="0,1,2", help="comma-separated seeds (0,1,2)")
    parser.add_argument(
        "--json",
        metavar="OUT",
        help="write every figure as JSON, atomically (the pool's advice file on the trainer, "
        "LATENCY_ADVICE_FILE, advice.json in the pool's model directory by default: its "
        "dashboard shows it); {pool} in it, or a directory, as LATENCY_ADVICE_FILE takes "
        "them, names the --pool's file",
    )
    parser.add_argument("--plots", metavar="DIR", help="write ttft_cdf.png and traffic.png")
    parser.add_argument("--policies", default=DEFAULT_POLICIES, help=f"({DEFAULT_POLICIES})")
    parser.add_argument(
        "--hardware",
        default="h200",
        help="CLASS: the class of rows without a pod_class, and the pool's when no row names "
        "one (h200); CLASS:COUNT[,CLASS:COUNT...]: the pods of each class (--pods defaults to "
        "their sum), their speeds still read from the rows of that class",
    )
    parser.add_argument(
        "--roles",
        help="prefill:N,decode:M: simulate a prefill/decode pool of these pods (--pods "
        "defaults to their sum); by default one when the rows show both roles (pod_type), "
        "--pods split by the load each role's rows imply",
    )
    parser.add_argument(
        "--pd-threshold",
        type=int,
        default=16,
        help="P/D pools: split a request when its decode pod lacks at least this many "
        "prompt tokens (llm-d's nonCachedTokens; 16 as its sample P/D config; 0: never)",
    )
    parser.add_argument(
        "--sim-seconds", type=float, default=0.0, help="simulated seconds of arrivals (0: auto)"
    )
    parser.add_argument(
        "--speedup", type=float, default=0.0, help="pace of the predictor policies (0: auto)"
    )
    parser.add_argument("--fit-rows", type=int, default=240, help="rows rebuilt for the fit")
    parser.add_argument("--no-progress", action="store_true", help="no progress on stderr")


class UsageProblem(Exception):
    pass


def _out(text: str) -> None:
    print(text, flush=True)  # noqa: T201 (command output)


def _err(text: str) -> None:
    print(f"latency-predictor advise: {text}", file=sys.stderr, flush=True)  # noqa: T201


def _seeds(text: str) -> tuple[int, ...]:
    try:
        seeds = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise UsageProblem(f"--seeds: not comma-separated integers: {text!r}") from None
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UsageProblem(f"--seeds: distinct integers >= 0 needed, got {text!r}")
    return seeds


def _policies(text: str) -> tuple[str, ...]:
    from poolsim.policies import check_name

    names = tuple(n.strip() for n in text.split(",") if n.strip())
    if not names:
        raise UsageProblem("--policies: none given")
    for name in names:
        try:
            check_name(name)
        except ValueError as exc:
            raise UsageProblem(f"--policies: {exc}") from None
    return names


def pool_name(value: str) -> str:
    """argparse type: a pool name (a DNS label); argparse names --pool in its message."""
    try:
        return checked_pool_name(value)
    except PoolNameError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def json_path(value: str, pool: str | None) -> Path:
    """--json's path, read as the trainer reads LATENCY_ADVICE_FILE (shared.advice_file):
    {pool} replaced by the pool's name, a directory standing for <dir>/{pool}.json."""
    template = as_template(value)
    return pool_file(template, pool or DEFAULT_POOL) if is_per_pool(template) else Path(value)


def _json_usage(value: str | None, pool: str | None) -> None:
    if not value:
        return
    if problem := template_problem(value):
        raise UsageProblem(f"--json {value}: {problem}")
    template = as_template(value)
    if is_per_pool(template) and pool is None:  # every pool's rows are no one pool's advice
        which = "" if template == value else f" (a directory: {template})"
        raise UsageProblem(f"--json {value}{which}: {POOL_PLACEHOLDER} needs --pool NAME")


def _hardware(args: argparse.Namespace) -> tuple[tuple[str, int], ...]:
    """--hardware's counts (() for one class); sets args.pods to their sum."""
    from poolsim.hardware import HARDWARE, HardwareSpecError, parse_hardware

    if ":" not in args.hardware:
        if args.hardware not in HARDWARE:
            raise UsageProblem(f"--hardware: one of {', '.join(HARDWARE)}")
        if args.pods is None:
            raise UsageProblem("--pods is required (or --hardware CLASS:COUNT,...)")
        return ()
    try:
        pool = parse_hardware(args.hardware, args.pods)
    except HardwareSpecError as exc:
        raise UsageProblem(str(exc)) from None
    args.pods = len(pool)
    counts: dict[str, int] = {}
    for hw in pool:  # in the flag's order
        counts[hw.name] = counts.get(hw.name, 0) + 1
    return tuple(counts.items())


def _roles(args: argparse.Namespace) -> tuple[tuple[str, int], ...]:
    """--roles' pods per role, prefill first (() without it); --pods defaults to their sum."""
    from poolsim.roles import PREFILL, ROLES, RolesSpecError, parse_roles

    if args.pd_threshold < 0:
        raise UsageProblem("--pd-threshold must be >= 0")
    if not args.roles:
        return ()
    try:
        roles = parse_roles(args.roles, args.pods)
    except RolesSpecError as exc:
        raise UsageProblem(str(exc)) from None
    args.pods = len(roles)
    prefill = roles.count(PREFILL)
    return tuple(zip(ROLES, (prefill, len(roles) - prefill), strict=True))


def _positive(args: argparse.Namespace) -> None:
    if args.pods < 1:
        raise UsageProblem("--pods must be at least 1")
    if not args.hours > 0:
        raise UsageProblem("--hours must be positive")
    for flag in ("slo_ttft_ms", "slo_tpot_ms"):
        value = getattr(args, flag)
        if value is not None and not value > 0:
            raise UsageProblem(f"--{flag.replace('_', '-')} must be positive")
    if args.sim_seconds < 0 or args.speedup < 0 or args.fit_rows < 1:
        raise UsageProblem("--sim-seconds and --speedup must be >= 0, --fit-rows >= 1")


def check(args: argparse.Namespace) -> Options:
    if args.training_url:
        raise UsageProblem(NO_EXPORT)
    _json_usage(args.json, args.pool)
    roles = _roles(args)
    counts = _hardware(args)
    _positive(args)
    from poolsim.report import INSTALL_HINT, matplotlib_available

    if args.plots and not matplotlib_available():
        raise UsageProblem(INSTALL_HINT)
    return Options(
        url=args.db,
        pods=args.pods,
        hours=args.hours,
        slos=(args.slo_ttft_ms, args.slo_tpot_ms),
        seeds=_seeds(args.seeds),
        policies=_policies(args.policies),
        hardware=counts[0][0] if counts else args.hardware,
        sim_seconds=args.sim_seconds or None,
        speedup=args.speedup or None,
        fit_rows=args.fit_rows,
        pool=args.pool,
        counts=counts,
        roles=roles,
        pd_threshold=args.pd_threshold,
    )


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the servers started for the runs are stopped."""

    def interrupt(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run(args: argparse.Namespace) -> int:
    try:
        options = check(args)
    except UsageProblem as exc:
        _err(str(exc))
        return 2
    from advisor.advise import AdviseError, advise
    from advisor.rows import UrlError

    try:
        with _sigterm_interrupts():
            advice = advise(options, progress=not args.no_progress)
    except UrlError as exc:
        _err(str(exc))
        return 2
    except AdviseError as exc:
        _err(str(exc))
        return 1
    except KeyboardInterrupt:
        _err("interrupted; every server it started was stopped")
        return 130
    _answer(args, advice)
    return 0


def _answer(args: argparse.Namespace, advice: Advised) -> None:
    from advisor.report import screen, write_json

    _out(screen(advice.advice))
    if args.json:
        out = json_path(args.json, args.pool)
        write_json(out, advice.advice)
        _out(f"json: {out}")
    if args.plots:
        from advisor.plots import write_plots

        for path in write_plots(Path(args.plots), advice.advice.simulation, *advice.traffic):
            _out(f"plot: {path}")
