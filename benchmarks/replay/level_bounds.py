"""How much of a trace's pinball loss a p90 that only tracks the recent level could save.

    .venv/bin/python -m benchmarks.replay.level_bounds [--trace NAME ...] [--rows-per-batch 50]

For each trace and target, against the replay's naive running p90 (all actuals before the
batch), the pinball ratio of:
- causal windows: the p90 of the last W actuals before the batch (what any predictor that
  tracks the level could know, with no features at all);
- hindsight windows: the p90 of the W actuals centred on each row, the row's own
  neighbours included, i.e. knowing the future: a bound no real predictor reaches.
If even hindsight cannot get a target far below 1, its latency is mostly noise around a
level, and a p90 at 0.8x the naive one's loss needs features that explain that noise.
Pure computation on the trace files; no servers.
"""

from __future__ import annotations

import argparse

import numpy as np

from benchmarks.common import say
from benchmarks.trace_files import load_trace
from shared.targets import TARGETS
from training_server.retrain.scoring import pinball_loss

WINDOWS = (50, 100, 200, 400)
Q = 0.9


def ratios(actual_by_row: np.ndarray, per: int) -> dict[str, float]:
    measured = actual_by_row > 0
    batch_of = np.arange(len(actual_by_row)) // per
    y = actual_by_row[measured]
    batch = batch_of[measured]
    keep = batch >= 2  # the replay's warm-up batches are not scored
    first_of_batch = np.searchsorted(batch, batch)  # rows of earlier batches: y[:first]
    naive = np.array([np.quantile(y[:f], Q) if f else np.nan for f in first_of_batch])
    keep &= ~np.isnan(naive)
    base = pinball_loss(y[keep], naive[keep], Q)
    out = {}
    for w in WINDOWS:
        causal = np.array(
            [np.quantile(y[max(0, f - w) : f], Q) if f else np.nan for f in first_of_batch]
        )
        half = w // 2
        hindsight = np.array(
            [np.quantile(y[max(0, i - half) : i + half], Q) for i in range(len(y))]
        )
        out[f"causal {w}"] = pinball_loss(y[keep], causal[keep], Q) / base
        out[f"hindsight {w}"] = pinball_loss(y[keep], hindsight[keep], Q) / base
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", action="append")
    parser.add_argument("--rows-per-batch", type=int, default=50)
    args = parser.parse_args()
    names = args.trace or ["sharegpt-h200", "chatbot-synthetic-h200"]
    header = ["trace", "target", *(f"{k} {w}" for k in ("causal", "hindsight") for w in WINDOWS)]
    say(" | ".join(header))
    for name in names:
        rows = load_trace(name)
        for target in TARGETS:
            actual = np.array([float(r.get(target.actual_field) or 0) for r in rows])
            r = ratios(actual, args.rows_per_batch)
            cells = [f"{r[f'{k} {w}']:.2f}" for k in ("causal", "hindsight") for w in WINDOWS]
            say(" | ".join([name, target.value, *cells]))


if __name__ == "__main__":
    main()
