"""Replay recorded traces through the servers the way the EPP and the llm-d project use
them, score the p90 predictions, and judge the accuracy goals.

    .venv/bin/python -m benchmarks.replay [--trace NAME_OR_PATH ...]
        [--mode online|offline|inprocess|offline-inprocess] [--seeds N] [--seed S]
        [--rows-per-batch 50] [--batch-seconds 1] [--speedup 1] [--retrain-interval 10]
        [--windows 4] [--repeat N] [--drift FACTOR]
        [--model-type xgboost|lightgbm] [--objective quantile|mean]
        [--calibration none|split|adaptive] [--json] [--training-url URL --prediction-url URL]

online (default): benchmarks/replay/online.py, real servers, rows in trace order; --seeds N
repeats the run N times on fresh servers. offline: benchmarks/replay/offline.py, the llm-d
project's 90/10 protocol over HTTP against fresh servers per seed (seeds S..S+N-1).
inprocess and offline-inprocess: the same two protocols in one process, for quick A/B.
Each mode prints its tables, then the accuracy goals with a measured reason for every miss
(benchmarks/replay/goals.py).

Talks only to 127.0.0.1; every loop is bounded in count and time; it ends the servers it
started, by PID.
"""

from benchmarks.replay.cli import main

if __name__ == "__main__":
    main(description=(__doc__ or "").splitlines()[0])
