"""A mirror never goes back: behind a Service of several training replicas, one that has
not caught up answers the bundle (or live calibration file) before the newest, and a
prediction server that already mirrored the newest keeps it."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from devkit.synthetic import publish_trained_bundle
from prediction_server.mirror import import_mirrored
from prediction_server.watcher import _older_calibration
from shared.archive import archive_version, pack_bundle
from shared.artifact import bundle_dir_for, read_current_version
from shared.live_calibration import LiveCalibration, TargetLiveCalibration
from shared.targets import Target

OLD, NEW = "20261205T220000.000000Z", "20261205T220010.000000Z"


def archives(tmp_path: Path) -> dict[str, bytes]:
    trainer = tmp_path / "trainer"
    out = {}
    for version in (OLD, NEW):
        publish_trained_bundle(trainer, seed=1, version=version)
        out[version] = pack_bundle(bundle_dir_for(trainer, version), {"version": version})
    return out


def test_an_older_bundle_from_a_replica_behind_is_not_mirrored(tmp_path: Path) -> None:
    packed = archives(tmp_path)
    assert archive_version(packed[NEW]) == NEW
    assert archive_version(b"not a tar.gz") is None
    mirror = tmp_path / "mirror"
    assert import_mirrored(mirror, packed[NEW], NEW, "http://svc")
    assert not import_mirrored(mirror, packed[OLD], OLD, "http://svc")
    # the info said "newest" but the export came from the replica behind: still refused
    assert not import_mirrored(mirror, packed[OLD], NEW + "x", "http://svc")
    assert read_current_version(mirror) == NEW


def calibration(at: datetime) -> bytes:
    return (
        LiveCalibration(
            updated_at=at,
            quantile=0.9,
            through_sample_id=1,
            targets={t: TargetLiveCalibration(log_offset=0.1) for t in Target},
        )
        .model_dump_json()
        .encode()
    )


def test_an_older_live_calibration_file_is_not_mirrored() -> None:
    now = datetime.now(UTC)
    ours, older, newer = (
        calibration(now),
        calibration(now - timedelta(seconds=1)),
        calibration(now + timedelta(seconds=1)),
    )
    assert _older_calibration(older, ours)
    assert not _older_calibration(newer, ours)
    assert not _older_calibration(newer, None)
    assert not _older_calibration(b"{broken", ours)  # the reader judges a broken file
