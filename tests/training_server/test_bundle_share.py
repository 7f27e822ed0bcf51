"""Bundles shared through the store (LATENCY_SHARE_BUNDLES_IN_STORE): two training replicas
with model directories of their own, on one store; the one that retrains a pool publishes,
the other imports the pool's newest bundle and live calibration file and answers with them
(as prediction servers mirroring from the trainer's Service ask either)."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from shared.live_calibration import LIVE_CALIBRATION
from tests.apps import app_of
from tests.polling import eventually
from tests.training_server.conftest import OpenClient, ingest
from training_server.bundle_share import BundleShare, SharePuller


def calibrate(client: TestClient) -> None:
    """One live calibration step, and one pull (bundle_share.SharePuller's, on a replica
    that does not retrain the pool)."""
    calibrator = app_of(client).state.pools.default.calibrator
    calibrator.tick()
    calibrator.pull_shared()


def test_a_replica_without_the_directory_answers_with_the_newest_bundle(
    open_client: OpenClient, migrated_url: str
) -> None:
    a = open_client(name="a", db_url=migrated_url, share_bundles_in_store=True)
    b = open_client(name="b", db_url=migrated_url, share_bundles_in_store=True)
    ingest(b, synthetic_rows(400, seed=3))
    assert a.post("/retrain").json()["outcome"] == "ok"
    assert b.post("/retrain").json()["outcome"] == "follower"
    version = a.get("/model/download/info").json()["model_version"]
    assert version is not None
    assert b.get("/model/download/info").json()["model_version"] is None  # not yet pulled
    calibrate(a)  # the leader's first step writes the live calibration file and shares it
    calibrate(b)  # the follower's tick imports the bundle and copies the file
    assert b.get("/model/download/info").json()["model_version"] == version
    assert b.get("/model/ttft/xgb/json").content == a.get("/model/ttft/xgb/json").content
    model_dir_b = app_of(b).state.settings.model_dir
    model_dir_a = app_of(a).state.settings.model_dir
    assert model_dir_b != model_dir_a
    assert (model_dir_b / LIVE_CALIBRATION).read_bytes() == (
        model_dir_a / LIVE_CALIBRATION
    ).read_bytes()
    assert b.get("/calibration").json() == a.get("/calibration").json()

    ingest(b, synthetic_rows(200, seed=4))
    assert a.post("/retrain").json()["outcome"] == "ok"
    newer = a.get("/model/download/info").json()["model_version"]
    assert newer > version
    calibrate(b)
    assert b.get("/model/download/info").json()["model_version"] == newer


def test_a_broken_shared_bundle_is_refused_once_and_the_served_one_kept(
    open_client: OpenClient, migrated_url: str, tmp_path: Path
) -> None:
    a = open_client(name="a", db_url=migrated_url, share_bundles_in_store=True)
    ingest(a, synthetic_rows(400, seed=3))
    assert a.post("/retrain").json()["outcome"] == "ok"
    engine = app_of(a).state.pools.default.store.engine
    other = tmp_path / "elsewhere"
    share = BundleShare(engine, "default", other, keep=3)
    share._upsert(version="29991231T000000.000000Z", archive=b"not a tar.gz")
    assert share.pull(None) is None  # refused, and not retried
    assert share.pull(None) is None
    assert not (other / "CURRENT").exists()


class Counting:
    def __init__(self, fail: bool = False):
        self.pulls, self.fail = 0, fail

    def pull_shared(self) -> None:
        self.pulls += 1
        if self.fail:
            raise RuntimeError("a store hiccup")


def test_the_puller_pulls_every_pool_in_its_own_thread_past_a_failing_one() -> None:
    broken, fine = Counting(fail=True), Counting()
    puller = SharePuller(lambda: [broken, fine], interval=0.05).start()
    try:
        eventually(lambda: fine.pulls >= 3, 10, "three pulls of the pool after a failing one")
    finally:
        puller.stop()
    assert broken.pulls >= 3
