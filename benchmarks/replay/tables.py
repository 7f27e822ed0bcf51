"""The replay's printed tables: one line per slice (online) or per target (offline), the
ratios against the recent naive p90 and, in a drift replay, the figures after the shift
(online), then the goal table of every trace and target."""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks.common import say
from benchmarks.replay.goals import (
    OFFLINE_GOALS_HEADER,
    ONLINE_GOALS_HEADER,
    offline_goal_row,
    online_goal_row,
)
from benchmarks.replay.metrics import RECENT_NAIVE_ROWS

ONLINE_MODES = ("online", "inprocess")


def _f(value: float | None, digits: int) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def _num(value: float | None) -> str:
    """Latency-sized numbers: 3 significant-ish figures without going scientific."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


HEADER = (
    f"{'target':<6} {'slice':<16} {'n':>5}  {'cov':>5} {'naive':>5}  "
    f"{'pinball':>8} {'naive':>8} {'ratio':>5}  {'MAE':>7} {'naive':>7}  "
    f"{'RMSE':>7} {'naive':>7}"
)


def table_row(target: str, label: str, part: dict[str, Any]) -> str:
    m, n = part["model"], part["naive"]
    return (
        f"{target:<6} {label:<16} {part['n']:>5}  {_f(m['coverage'], 3):>5} "
        f"{_f(n['coverage'], 3):>5}  {_num(m['pinball_loss']):>8} {_num(n['pinball_loss']):>8} "
        f"{_f(part['pinball_ratio'], 2):>5}  {_num(m['mae']):>7} {_num(n['mae']):>7}  "
        f"{_num(m['rmse']):>7} {_num(n['rmse']):>7}"
    )


def online_table(target: str, summary: dict[str, Any]) -> list[str]:
    lines = [
        table_row(target, "overall", summary["overall"]),
        table_row(target, "after 1st model", summary["after_first_model"]),
        table_row(target, "second half", summary["second_half"]),
    ]
    k = len(summary["windows"])
    for i, window in enumerate(summary["windows"]):
        lines.append(table_row(target, f"window {i + 1}/{k}", window))
    return lines


def _cov(value: float | None) -> str:
    return _f(value, 3)


def offline_row(target: str, agg: dict[str, Any]) -> str:
    def ms(who: str, metric: str, fmt: Any) -> str:
        s = agg[who][metric]
        text = fmt(s["mean"])
        return text if agg["seeds"] == 1 or s["std"] is None else f"{text}±{fmt(s['std'])}"

    r = agg["pinball_ratio"]
    ratio_text = _f(r["mean"], 2) + ("" if agg["seeds"] == 1 else f"±{_f(r['std'], 2)}")
    return (
        f"{target:<6} {_num(agg['n_test']['mean']):>5}  {ms('model', 'coverage', _cov):>11} "
        f"{ms('naive', 'coverage', _cov):>11}  {ms('model', 'pinball_loss', _num):>13} "
        f"{ms('naive', 'pinball_loss', _num):>13} {ratio_text:>9}  "
        f"{ms('model', 'mae', _num):>11} {ms('naive', 'mae', _num):>11}  "
        f"{ms('model', 'rmse', _num):>11} {ms('naive', 'rmse', _num):>11}"
    )


OFFLINE_HEADER = (
    f"{'target':<6} {'n':>5}  {'cov':>11} {'naive cov':>11}  {'pinball':>13} "
    f"{'naive':>13} {'ratio':>9}  {'MAE':>11} {'naive':>11}  {'RMSE':>11} "
    f"{'naive':>11}"
)


def print_online(result: dict[str, Any], args: argparse.Namespace) -> None:
    if args.mode == "inprocess":
        say(
            f"\n## in-process replay: {result['trace']} ({result['rows']} rows, "
            f"{result['batches']} batches of {args.rows_per_batch}, retrain clock every "
            f"{args.retrain_interval / args.batch_seconds:g} batches, held-out seed "
            f"{result['seed']})"
        )
    else:
        _online_heading(result, args)
    say(
        f"scored: rows from batch {args.warmup_batches + 1} on, each for the target it "
        f"measures; naive = running p90 of the actuals sent before the batch"
    )
    say(HEADER)
    for target, summary in result["targets"].items():
        for line in online_table(target, summary):
            say(line)
    for line in recent_table(result["targets"]):
        say(line)
    for line in drift_table(result["targets"]):
        say(line)


def recent_table(targets: dict[str, Any]) -> list[str]:
    """Pinball ratios against the recent naive p90, the running p90's in brackets."""
    first = next(iter(targets.values()))
    k = len(first["windows"])
    lines = [
        f"naive_recent = p90 of the last {RECENT_NAIVE_ROWS} actuals sent before the batch; "
        "pinball ratio model / naive_recent (model / running p90)",
        f"{'target':<6} {'cov':>5}  {'overall':>11} {'second half':>11} "
        + " ".join(f"{f'window {i + 1}/{k}':>11}" for i in range(k)),
    ]
    for target, summary in targets.items():
        recent = summary["vs_naive_recent"]
        pairs = [
            (recent["overall"], summary["overall"]["pinball_ratio"]),
            (recent["second_half"], summary["second_half"]["pinball_ratio"]),
            *zip(recent["windows"], [w["pinball_ratio"] for w in summary["windows"]], strict=True),
        ]
        cells = " ".join(f"{f'{_f(ours, 2)} ({_f(running, 2)})':>11}" for ours, running in pairs)
        lines.append(f"{target:<6} {_cov(recent['naive_recent']['coverage']):>5}  {cells}")
    return lines


def coverages(windows: list[dict[str, Any]], key: str = "coverage") -> str:
    """A drift part's coverage per window after the shift, compact: "0.41 0.85 0.90"."""
    return " ".join(_f(w[key], 2) for w in windows)


def drift_table(targets: dict[str, Any]) -> list[str]:
    """After the shift of a drift replay: coverage per window, then the first span."""
    parts = {target: s["drift"] for target, s in targets.items() if "drift" in s}
    if not parts:
        return []
    d = next(iter(parts.values()))
    lines = [
        f"after the shift (actuals x{d['factor']:g} from row {d['shift_row']}, sent at "
        f"{d['shift_s']:g} s): coverage per {d['window_s']:g} s, then over the first "
        f"{d['span_s']:g} s"
    ]
    for target, drift in parts.items():
        span, windows = drift["span"], drift["windows"]
        lines += [
            f"{target:<6} model        {coverages(windows)}",
            f"{target:<6} naive_recent {coverages(windows, 'naive_recent_coverage')}",
        ]
        undrifted = "undrifted_pinball_ratio" in span  # in process: the replay without it
        if undrifted:
            lines.append(f"{target:<6} no drift     {coverages(windows, 'undrifted_coverage')}")
        lines.append(
            f"{target:<6} first {drift['span_s']:g} s: n {span['n']}, coverage "
            f"{_cov(span['coverage'])} (naive_recent {_cov(span['naive_recent_coverage'])}), "
            f"pinball {_num(span['pinball'])} (naive_recent {_num(span['naive_recent_pinball'])})"
            f", ratio {_f(span['pinball_ratio'], 2)}"
            + (f" (no drift {_f(span['undrifted_pinball_ratio'], 2)})" if undrifted else "")
        )
    return lines


def _online_heading(result: dict[str, Any], args: argparse.Namespace) -> None:
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
        f"\n## accuracy goals ({args.mode}"
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
