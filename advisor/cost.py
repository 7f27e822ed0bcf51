"""What the sidecars would cost at the pool's request rate, from measured footprints.

Every constant is a figure measured on the 2-core CI machine (benchmarks/README.md, the
section named beside it). Per pick the EPP sends one /predict/bulk/strict call with a row
per pod; the trainer takes two rows per request (TTFT and TPOT) and retrains every 10 s.

- prediction CPU = peak picks/s x (1 / calls per second one worker serves at that call
  size); workers = that / WORKER_BUSY_LIMIT, rounded up, at least 1 (a worker kept at most
  half busy keeps its p99 near its p50);
- prediction memory = workers x PREDICTION_WORKER_RSS_MB;
- trainer CPU = RETRAIN_S / RETRAIN_INTERVAL_S + 2 x peak requests/s / INGEST_ROWS_PER_S;
- trainer memory = TRAINER_RSS_MB (idle with a model .. after a 85k-row soak).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# benchmarks/README.md, "bench_predict.py", final-code table: one worker's calls/s at
# concurrency 16 by rows per call, the lower of the two runs.
CALLS_PER_S_BY_ROWS = ((1, 1932.0), (8, 2005.0), (32, 1805.0), (100, 1316.0), (400, 445.0))
# benchmarks/README.md, "bench_load.py": 96 MB at start, 100 MB at most (bench_predict.py:
# 98-100 MB after each run); README "Scale out": 96-100 MB RSS per worker.
PREDICTION_WORKER_RSS_MB = 100.0
WORKER_BUSY_LIMIT = 0.5
# benchmarks/README.md, "The model choice within 2.5 s": 1.80-1.93 s per retrain of both
# targets at 200k stored rows on one core (an upper bound: fewer rows retrain faster).
RETRAIN_S = 1.93
RETRAIN_INTERVAL_S = 10.0
# benchmarks/README.md, "bench_store.py": 10,455 rows/s over HTTP in 1,000-row calls, one
# sender, SQLite (the slower store), so one core ingests at least this.
INGEST_ROWS_PER_S = 10_455.0
# benchmarks/README.md: "bench_slice.py" 146 MB idle with a loaded model; "soak.py"
# 194-198 MB at the end of 85k rows.
TRAINER_RSS_MB = (146.0, 198.0)


@dataclass(frozen=True)
class Cost:
    picks_per_s: float  # the pool's peak minute, requests per second
    rows_per_call: int  # pods
    prediction_cpu_cores: float
    prediction_workers: int
    prediction_memory_mb: float
    trainer_cpu_cores: float
    trainer_memory_mb: tuple[float, float]

    @property
    def total_cpu_cores(self) -> float:
        return self.prediction_cpu_cores + self.trainer_cpu_cores


def calls_per_s(rows: int) -> float:
    """One worker's calls/s for calls of `rows` rows: the measured size at or above it."""
    for size, rate in CALLS_PER_S_BY_ROWS:
        if rows <= size:
            return rate
    size, rate = CALLS_PER_S_BY_ROWS[-1]
    return rate * size / rows  # past the largest measured call: rows/s stays flat


def sidecar_cost(peak_requests_per_minute: float, pods: int) -> Cost:
    picks = peak_requests_per_minute / 60.0
    cpu = picks / calls_per_s(pods)
    workers = max(1, math.ceil(cpu / WORKER_BUSY_LIMIT))
    trainer = RETRAIN_S / RETRAIN_INTERVAL_S + 2.0 * picks / INGEST_ROWS_PER_S
    return Cost(
        picks_per_s=picks,
        rows_per_call=pods,
        prediction_cpu_cores=cpu,
        prediction_workers=workers,
        prediction_memory_mb=workers * PREDICTION_WORKER_RSS_MB,
        trainer_cpu_cores=trainer,
        trainer_memory_mb=TRAINER_RSS_MB,
    )
