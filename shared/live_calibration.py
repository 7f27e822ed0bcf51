"""The live calibration file, the live factor's format: a correction of the served p90s that
moves every second, written by the leading trainer and read by every server.

    <model_dir>/calibration.json

The leading trainer scores the newest rows against what the served bundle answers for them,
and moves one log-factor per target against the misses (adaptive conformal inference,
training_server.retrain.live_calibration), plus a slow gap stepped on the p90s the EPP
acted on (the `predicted_*_ms` of each training row; training_server.retrain.served_gap):
`log_offset` is what is served, `served_gap` the part of it that is the gap. It rewrites this small
file atomically after each step; every prediction server re-reads it when it changes and
multiplies its answers by the factor, on top of the bundle's own conformal factor
(training_server.retrain.cross_conformal; both multiply in shared.served). A model
bundle changes every retrain (10 s); this file can follow a load shift within a second.

A pool whose rows fall into groups (shared.live_groups: P/D roles, hardware classes, or
both) gets a factor per group as well: a noisy neighbour slows one class, a prefill pod's
TTFT is not a decode pod's, and one factor for the whole pool would under-cover one group
while over-covering the others. Rows of a group are served with its factor; rows of no
group, or of one the leader has no factor for, with the pool's.

A target may also be blended with its level (training_server.retrain.level_blend): served
is then `blend_weight * answer + (1 - blend_weight) * blend_level_ms`, the answer being the
model's times both factors. A weight of 1 (the default, and what a file without the field
means) serves the answer alone. In a pool whose rows fall into groups only the groups'
blends serve, each for its own rows.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from shared.artifact import replace_file
from shared.targets import Target

LIVE_CALIBRATION = "calibration.json"
CALIBRATION_FORMAT = 1
# Live factors stay within e^-2..e^2 (0.14x..7.4x): beyond that the model, not its
# calibration, is what needs fixing, and a runaway factor must not reach the EPP.
MAX_LIVE_LOG_OFFSET = 2.0


@dataclass(frozen=True)
class Blend:
    """Serve `weight * answer + (1 - weight) * level_ms`."""

    weight: float
    level_ms: float

    def serve(self, answers: np.ndarray) -> np.ndarray:
        blended: np.ndarray = self.weight * answers + (1.0 - self.weight) * self.level_ms
        return blended


@dataclass(frozen=True)
class LiveOffsets:
    """The live log-factors to serve: the pool's per target, and per group of rows
    (shared.live_groups: "decode", "h200", "decode/h200") for the rows of that group; and
    the blends with the level, keyed alike ("" for the pool's), where a target has one."""

    pool: dict[Target, float] = field(default_factory=dict)
    groups: dict[str, dict[Target, float]] = field(default_factory=dict)
    blends: dict[str, dict[Target, Blend]] = field(default_factory=dict)


NO_LIVE_OFFSETS = LiveOffsets()


# Fields this release does not know are ignored, not refused: trainers and prediction
# servers are separate Deployments, updated in no set order, and a server that refused a
# newer trainer's file would keep a stale factor until its own update. A change of what a
# known field means bumps `format_version` instead.
class TargetLiveCalibration(BaseModel):
    model_config = ConfigDict(extra="ignore")

    log_offset: float = Field(0.0, ge=-MAX_LIVE_LOG_OFFSET, le=MAX_LIVE_LOG_OFFSET)
    rows: int = Field(0, ge=0, description="served predictions scored so far")
    recent_coverage: float | None = Field(
        None, ge=0.0, le=1.0, description="share of recent actuals at or below the served p90"
    )
    served_gap: float = Field(
        0.0,
        ge=-MAX_LIVE_LOG_OFFSET,
        le=MAX_LIVE_LOG_OFFSET,
        description="the part of log_offset stepped on the served p90s alone (the rest is "
        "the factor scored on the rows as they arrive); kept so a new leader resumes both",
    )
    served_level: float = Field(
        0.0, ge=-1.0, le=1.0, description="the quantile level the served gap adds"
    )
    fit_since: int = Field(
        0,
        ge=0,
        description="first row id of a new level after a large shift (0: none): the "
        "retrains fit the rows since once enough have arrived; kept so a new leader does too",
    )
    blend_weight: float = Field(
        1.0, ge=0.0, le=1.0, description="the answer's share of what is served (1: no blend)"
    )
    blend_level_ms: float = Field(
        0.0, ge=0.0, description="the quantile of the newest actuals the answer is blended with"
    )

    @property
    def blend(self) -> Blend | None:
        """The blend to serve, None when the answer is served alone."""
        if self.blend_weight >= 1.0 or self.blend_level_ms <= 0.0:
            return None
        return Blend(self.blend_weight, self.blend_level_ms)

    @property
    def factor_log_offset(self) -> float:
        """The factor scored on the rows as they arrive, without the served gap."""
        return self.log_offset - self.served_gap


class LiveCalibration(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # A file of a newer format is refused (the reader keeps the last one it read).
    format_version: int = Field(CALIBRATION_FORMAT, ge=1, le=CALIBRATION_FORMAT)
    updated_at: datetime
    quantile: float
    through_sample_id: int = Field(ge=0, description="last training row taken into account")
    # The bundle whose answers these factors correct (None: not said). A prediction server
    # that loaded a newer bundle first waits for the factors rebased onto it
    # (prediction_server.watcher): the old bundle's factors on the new bundle are wrong by
    # what the new one corrects itself (after a shift, by 20 % and more).
    bundle_version: str | None = None
    targets: dict[Target, TargetLiveCalibration]
    # per group of rows (shared.live_groups): the factor its rows are served with
    groups: dict[str, dict[Target, TargetLiveCalibration]] = Field(default_factory=dict)

    def log_offsets(self, quantile: float) -> LiveOffsets:
        """The offsets to serve with a bundle of `quantile` (none for another quantile)."""
        if self.quantile != quantile:
            return NO_LIVE_OFFSETS
        # Where a target's rows fall into groups, each group's level is its own and the
        # pool's (a mix of the groups') blends no row: a group's rows before it has a level
        # of its own are served the answer alone.
        grouped = {t for targets in self.groups.values() for t in targets}
        every = {"": {t: e for t, e in self.targets.items() if t not in grouped}, **self.groups}
        blends = {
            name: {t: blend for t, entry in targets.items() if (blend := entry.blend)}
            for name, targets in every.items()
        }
        return LiveOffsets(
            pool={t: entry.log_offset for t, entry in self.targets.items()},
            groups={
                name: {t: entry.log_offset for t, entry in targets.items()}
                for name, targets in self.groups.items()
            },
            blends={name: targets for name, targets in blends.items() if targets},
        )


def write_live_calibration(model_dir: Path, calibration: LiveCalibration) -> None:
    model_dir.mkdir(parents=True, exist_ok=True)
    replace_file(model_dir / LIVE_CALIBRATION, calibration.model_dump_json(indent=2).encode())


def read_live_calibration(model_dir: Path) -> LiveCalibration | None:
    """The published live calibration; None when there is none. Raises ValueError on a file
    that does not validate (the caller keeps what it had)."""
    try:
        data = (model_dir / LIVE_CALIBRATION).read_bytes()
    except FileNotFoundError:
        return None
    try:
        return LiveCalibration.model_validate_json(data)
    except ValidationError as exc:
        raise ValueError(f"{LIVE_CALIBRATION}: {exc}") from exc


def remove_live_calibration(model_dir: Path) -> None:
    (model_dir / LIVE_CALIBRATION).unlink(missing_ok=True)


class LiveCalibrationReader:
    """Follows the published file: poll() re-reads it only when it was replaced (every
    write is a rename, so a new inode), and keeps the last good one if a read fails."""

    def __init__(self, model_dir: Path):
        self.model_dir = model_dir
        self.current: LiveCalibration | None = None
        self._seen: tuple[int, int, int] | None = None

    def poll(self) -> bool:
        """True when `current` changed (including to None: the file was removed)."""
        try:
            st = (self.model_dir / LIVE_CALIBRATION).stat()
        except FileNotFoundError:
            changed = self.current is not None
            self.current, self._seen = None, None
            return changed
        signature = (st.st_ino, st.st_mtime_ns, st.st_size)
        if signature == self._seen:
            return False
        self._seen = signature
        self.current = read_live_calibration(self.model_dir)
        return True

    def log_offsets(self, quantile: float) -> LiveOffsets:
        return NO_LIVE_OFFSETS if self.current is None else self.current.log_offsets(quantile)
