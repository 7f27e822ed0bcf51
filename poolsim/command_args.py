"""The flags of `latency-predictor simulate` (poolsim.command runs it)."""

from __future__ import annotations

import argparse

from poolsim.hardware import HARDWARE_SPEC_HELP
from poolsim.policies import FACTORIES
from poolsim.pool_changes import JOIN_HELP, SLOWDOWN_HELP
from poolsim.roles import DEFAULT_PD_THRESHOLD, ROLES_HELP, THRESHOLD_HELP
from poolsim.workloads import WORKLOADS

DEFAULT_POLICIES = "random,round-robin,least-requests,heuristic,oracle"
# A 10-minute run of 8 pods at x5: 120 s paced, ~100 s of CPU on the request path for the
# busiest workload (chat, 38k requests), within 3 minutes (benchmarks/README.md, "Speed").
DEFAULT_SPEEDUP = 5.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--workload", required=True, help=f"{', '.join(WORKLOADS)}, or a JSONL file to replay"
    )
    parser.add_argument(
        "--pods",
        type=int,
        default=None,
        help="pods in the pool (8; with --hardware counts, their sum)",
    )
    parser.add_argument(
        "--duration",
        type=float,
        default=600.0,
        help="seconds of arrivals (600; a replay keeps arrivals before it)",
    )
    parser.add_argument(
        "--policies",
        default=DEFAULT_POLICIES,
        help=f"comma-separated, of {', '.join(FACTORIES)} ({DEFAULT_POLICIES}); llm-d's "
        "picker with knobs: predicted-latency:least|most:tau=0.99+0.8|0.8|0.6:noslo",
    )
    parser.add_argument("--seed", type=int, default=0, help="workload and policy seed (0)")
    parser.add_argument(
        "--rate-scale",
        type=float,
        default=1.0,
        metavar="X",
        help="a named workload's arrival rate times X (1: the rate set for monolithic pods; "
        "a P/D pool's is sized in benchmarks/README.md, P/D disaggregation)",
    )
    parser.add_argument("--hardware", default="h200", help=f"{HARDWARE_SPEC_HELP} (h200)")
    parser.add_argument(
        "--join",
        action="append",
        metavar="CLASS:COUNT@SECONDS",
        help=f"{JOIN_HELP}; e.g. b200:2@120",
    )
    parser.add_argument(
        "--slowdown",
        action="append",
        metavar="CLASS:FACTOR@SECONDS",
        help=f"{SLOWDOWN_HELP}; e.g. h200:1.5@180",
    )
    parser.add_argument(
        "--roles",
        metavar="prefill:N,decode:M",
        help=f"{ROLES_HELP}; e.g. prefill:2,decode:6 (default: no roles, monolithic pods)",
    )
    parser.add_argument(
        "--pd-threshold",
        type=int,
        default=DEFAULT_PD_THRESHOLD,
        metavar="TOKENS",
        help=THRESHOLD_HELP,
    )
    parser.add_argument("--json", metavar="OUT", help="write every figure as JSON")
    parser.add_argument(
        "--plots",
        metavar="DIR",
        help="write ttft_cdf.png, pod_share.png, pod_share_over_time.png, regret_per_minute.png "
        "and class_share_over_time.png",
    )
    add_predictor_arguments(parser)
    parser.add_argument(
        "--no-regret",
        action="store_true",
        help="skip the decision regret and its look-aheads at every pick (faster; its "
        "figures are then null)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def add_predictor_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of the policies that run on a real predictor."""
    parser.add_argument(
        "--speedup",
        type=float,
        default=DEFAULT_SPEEDUP,
        help="simulated seconds per wall second for policies that use a real "
        f"predictor ({DEFAULT_SPEEDUP:g}); the others run as fast as the CPU allows",
    )
    parser.add_argument(
        "--training-url",
        help="predicted-latency: the trainer to send training rows to (with --prediction-url; "
        "default: start our servers for the run)",
    )
    parser.add_argument(
        "--prediction-url",
        help="predicted-latency: comma-separated prediction server URLs to use instead of "
        "starting our own (without --training-url no training rows are sent)",
    )
    parser.add_argument(
        "--prediction-servers",
        type=int,
        default=1,
        help="predicted-latency: prediction servers to start beside our trainer (1)",
    )
    parser.add_argument(
        "--max-model-age",
        type=float,
        default=12.0,
        help="predicted-latency: simulated seconds a model may serve before simulated time "
        "waits for the next one (12 = the 10 s retrain interval + 2 s; 0: never wait)",
    )
