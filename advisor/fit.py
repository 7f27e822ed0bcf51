"""How well the simulator's pod model reproduces the rows: poolsim.calibrate's check, on
the store's rows instead of the traces.

Each sampled row's pod is rebuilt on the simulator (poolsim.reconstruct: its queue, its
decoding requests holding its KV share, a closed background) and the row's request served
on it; simulated and measured medians are compared per target (TTFT, TPOT) and prompt
band (`poolsim.calibrate.compare`, with the output model the rows show). A cell of at least
`poolsim.calibrate.MIN_BAND_ROWS` rows off by more than ERROR_LIMIT makes the verdict's
confidence low: the simulated pool is then not the measured one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from advisor.rows import StoreRows
from poolsim.calibrate import MIN_BAND_ROWS, compare, sample_rows
from poolsim.hardware import Hardware
from poolsim.reconstruct import OutputModel

FIT_ROWS = 240  # rows rebuilt (a fixed random sample): 0.2-10 s, by how queued the pods were
ERROR_LIMIT = 0.25
SAMPLE_SEED = 7
FIELDS = (
    "input_token_length",
    "num_request_waiting",
    "num_request_running",
    "kv_cache_percentage",
    "prefill_tokens_in_flight",
    "actual_ttft_ms",
    "actual_tpot_ms",
)


@dataclass(frozen=True)
class FitCell:
    target: str  # "ttft" or "tpot"
    band: str  # prompt tokens, or "all"
    rows: int
    measured_ms: float  # median
    simulated_ms: float  # median
    pod_class: str = ""  # the class whose rows these are ("": the whole store)

    @property
    def error(self) -> float:
        """simulated / measured - 1 (+0.30: the simulated pod is 30 % slower)."""
        return self.simulated_ms / self.measured_ms - 1.0 if self.measured_ms > 0 else 0.0

    @property
    def judged(self) -> bool:
        return self.rows >= MIN_BAND_ROWS


@dataclass(frozen=True)
class FitReport:
    hardware: str
    rows_checked: int
    cells: tuple[FitCell, ...]

    @property
    def worst(self) -> FitCell | None:
        judged = [cell for cell in self.cells if cell.judged]
        return max(judged, key=lambda cell: abs(cell.error)) if judged else None

    @property
    def off(self) -> tuple[FitCell, ...]:
        """Judged cells off by more than ERROR_LIMIT."""
        return tuple(c for c in self.cells if c.judged and abs(c.error) > ERROR_LIMIT)


def trace_rows(rows: StoreRows) -> list[dict[str, float]]:
    """The rows in the traces' shape (what poolsim.reconstruct reads), measuring rows only."""
    columns = (
        rows.input_tokens,
        rows.waiting,
        rows.running,
        rows.kv_cache,
        rows.prefill_in_flight,
        rows.ttft_ms,
        rows.tpot_ms,
    )
    keep = np.flatnonzero((rows.measures_ttft | rows.measures_tpot) & (rows.input_tokens >= 1))
    return [dict(zip(FIELDS, (float(c[i]) for c in columns), strict=True)) for i in keep]


def check_fit(
    rows: StoreRows, hw: Hardware, outputs: OutputModel, count: int = FIT_ROWS, pod_class: str = ""
) -> FitReport:
    """`hw` against `rows` (of one class when `pod_class` names it: the cells say so)."""
    sample = sample_rows(trace_rows(rows), count, seed=SAMPLE_SEED)
    fits = compare("store", sample, hw, seed=0, outputs=outputs)
    cells = tuple(
        FitCell(f.target, f.band, f.rows, f.recorded_median, f.simulated_median, pod_class)
        for f in fits
    )
    return FitReport(hw.name, len(sample), cells)


def merged(name: str, reports: list[FitReport]) -> FitReport:
    """One report of several classes' (each cell keeps its class)."""
    cells = tuple(cell for report in reports for cell in report.cells)
    return FitReport(name, sum(report.rows_checked for report in reports), cells)
