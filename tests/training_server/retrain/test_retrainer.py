"""Retrainer.run_once on a real store (SQLite and PostgreSQL) with real XGBoost/LightGBM fits."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from devkit.synthetic import synthetic_row, synthetic_rows
from shared.artifact import read_current_version
from shared.features import columns_from_dicts
from shared.predictor import LoadedBundle, load_current_bundle
from shared.schemas import TrainingEntry
from shared.settings import ModelType, ObjectiveType
from shared.targets import TARGETS, Target
from tests.conftest import training_settings
from tests.slots import RecordingSlot
from training_server.metrics import TrainingMetrics
from training_server.retrain.retrainer import FIT_SINCE_MIN_ROWS, Retrainer
from training_server.retrain.schedule import MAX_BACKOFF
from training_server.store import SampleStore

Choice = tuple[ModelType, ObjectiveType]


def add(store: SampleStore, n: int, seed: int) -> None:
    store.add_samples([TrainingEntry.model_validate(r) for r in synthetic_rows(n, seed=seed)])


def make(
    tmp_path: Path,
    store: SampleStore,
    url: str,
    serving: LoadedBundle | None = None,
    **overrides: object,
) -> tuple[Retrainer, list[LoadedBundle], TrainingMetrics]:
    """A retrainer whose slot starts serving `serving`; the list is what it publishes."""
    metrics = TrainingMetrics()
    settings = training_settings(tmp_path, url, **overrides)
    slot = RecordingSlot(settings, serving)
    return Retrainer(settings, store, metrics, slot), slot.history, metrics


def retrains_count(metrics: TrainingMetrics, status: str) -> float | None:
    return metrics.registry.get_sample_value("latency_retrains_total", {"status": status})


def test_retrain_publishes_a_bundle(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path, model_choice: Choice
) -> None:
    model_type, objective = model_choice
    retrainer, published, metrics = make(
        tmp_path,
        store,
        migrated_url,
        model_dir=model_dir,
        model_type=model_type,
        objective_type=objective,
    )
    assert retrainer.run_once() == "skipped"  # empty store
    add(store, 400, seed=1)

    assert retrainer.run_once() == "ok"
    version = read_current_version(model_dir)
    assert version is not None
    assert [b.version for b in published] == [version]
    bundle = published[0]
    assert (bundle.model_type, bundle.objective, bundle.quantile) == (model_type, objective, 0.9)
    assert all(bundle.has_model(t) for t in TARGETS)
    loaded = load_current_bundle(model_dir)
    assert loaded is not None and loaded.version == version

    rows = store.list_retrains()
    assert len(rows) == 1
    row = rows[0]
    assert (row.status, row.version, row.error) == ("ok", version, None)
    assert (row.model_type, row.objective) == (model_type.value, objective.value)
    assert row.max_sample_id == store.max_sample_id()
    counts = store.counts().as_json()
    for t in TARGETS:
        scores = row.targets[t]
        assert scores.train_samples == counts["training_data"][f"{t.value}_samples"]
        assert scores.test_samples == counts["test_data"][f"{t.value}_samples"] > 0
        for name in ("mae", "rmse", "pinball_loss", "coverage", "violation_rate"):
            assert getattr(scores, name) is not None, name
        assert scores.coverage is not None and 0.0 <= scores.coverage <= 1.0
        assert scores.violation_rate == pytest.approx(1 - scores.coverage)
    assert retrainer.state.last_success is not None
    assert retrainer.state.last_success.version == version
    assert retrains_count(metrics, "ok") == 1

    assert retrainer.run_once() == "skipped"  # nothing new
    assert len(published) == 1 and len(store.list_retrains()) == 1

    add(store, 20, seed=2)
    assert retrainer.run_once() == "ok"
    assert len(published) == 2
    assert published[1].version != version
    assert read_current_version(model_dir) == published[1].version
    assert [r.version for r in store.list_retrains()] == [published[1].version, version]


def test_too_few_samples_is_skipped(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    # Half the rows go to test so every window has rows, but no target reaches 10 to fit on.
    halves = SampleStore(store.engine, test_ratio=0.5, rng=random.Random(3))
    add(halves, 24, seed=3)
    assert 0 < halves.counts().as_json()["training_data"]["ttft_samples"] < 10
    retrainer, published, _ = make(tmp_path, halves, migrated_url, model_dir=model_dir)
    assert retrainer.run_once() == "skipped"
    assert published == []
    assert read_current_version(model_dir) is None
    assert store.list_retrains() == []


def test_fewer_than_min_samples_publish_the_rows_quantile(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    """10..min_samples rows: a bundle whose models have no trees, so every row of a target
    with the same queue gets the same p90 (the rows' own), instead of the prior formula."""
    halves = SampleStore(store.engine, test_ratio=0.5, rng=random.Random(3))
    add(halves, 60, seed=3)
    assert 10 <= halves.counts().as_json()["training_data"]["tpot_samples"] < 50
    retrainer, published, _ = make(tmp_path, halves, migrated_url, model_dir=model_dir)
    assert retrainer.run_once() == "ok", retrainer.state.last_error
    bundle = published[0]
    assert all(bundle.has_model(t) for t in TARGETS)
    rows = [dict(r, num_request_waiting=0) for r in synthetic_rows(20, seed=4)]
    predictions = bundle.predict(columns_from_dicts(rows))
    assert all(np.ptp(predictions[t]) == 0 for t in TARGETS)


def test_one_target_without_samples_still_trains_the_other(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    rng = random.Random(4)
    store.add_samples(
        [TrainingEntry.model_validate(synthetic_row(rng, measure="ttft")) for _ in range(200)]
    )
    retrainer, published, _ = make(tmp_path, store, migrated_url, model_dir=model_dir)
    assert retrainer.run_once() == "ok", retrainer.state.last_error
    assert published[0].has_model(TARGETS[0]) and not published[0].has_model(TARGETS[1])


def test_failed_publish_is_recorded_and_keeps_the_current_bundle(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    good, _published, _ = make(tmp_path, store, migrated_url, model_dir=model_dir)
    add(store, 400, seed=5)
    assert good.run_once() == "ok"
    current = read_current_version(model_dir)

    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a regular file where the model directory's parent should be")
    bad, bad_published, metrics = make(
        tmp_path, store, migrated_url, early_retrains=False, model_dir=blocker / "models"
    )
    add(store, 20, seed=6)
    assert bad.run_once() == "failed"
    assert bad.state.consecutive_failures == 1 and bad.state.total_failures == 1
    assert bad.state.last_error and "Error" in bad.state.last_error
    assert bad.state.last_success is None
    assert bad_published == []
    assert retrains_count(metrics, "failed") == 1
    assert retrains_count(metrics, "ok") is None
    assert metrics.registry.get_sample_value("latency_retrain_consecutive_failures") == 1

    newest = store.list_retrains()[0]
    assert (newest.status, newest.version) == ("failed", None)
    assert newest.error == bad.state.last_error
    assert read_current_version(model_dir) == current
    loaded = load_current_bundle(model_dir)
    assert loaded is not None and loaded.version == current

    interval = bad.settings.retraining_interval_sec
    # one failure: the next try at the usual time (the clock's, which started at creation)
    assert bad.next_wait() == pytest.approx(interval, abs=60)
    assert bad.run_once() == "failed"  # still broken, and nothing new is needed to retry
    assert bad.state.consecutive_failures == 2
    assert retrains_count(metrics, "failed") == 2
    assert bad.next_wait() == 2 * interval  # backing off
    for _ in range(5):
        bad.run_once()
    assert bad.next_wait() == MAX_BACKOFF * interval  # and no further

    blocker.unlink()  # the directory becomes creatable: the next attempt recovers
    assert bad.run_once() == "ok"
    assert bad.state.consecutive_failures == 0 and bad.state.last_error is None
    assert bad.state.total_failures == 7
    assert bad.next_wait() == pytest.approx(interval, abs=60)
    assert metrics.registry.get_sample_value("latency_retrain_consecutive_failures") == 0
    assert read_current_version(blocker / "models") == bad_published[0].version


def test_resume_does_not_retrain_a_model_that_saw_every_sample(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    first, _, _ = make(tmp_path, store, migrated_url, model_dir=model_dir)
    add(store, 400, seed=7)
    assert first.run_once() == "ok"
    version = read_current_version(model_dir)

    restarted, published, _ = make(
        tmp_path, store, migrated_url, serving=load_current_bundle(model_dir), model_dir=model_dir
    )
    restarted.resume()
    assert restarted.state.last_success is not None
    assert restarted.state.last_success.version == version
    assert restarted.run_once() == "skipped"
    assert published == []

    add(store, 20, seed=8)
    assert restarted.run_once() == "ok"
    assert published[0].version != version


def test_resume_without_the_recorded_bundle_retrains(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    first, _, _ = make(tmp_path, store, migrated_url, model_dir=model_dir)
    add(store, 400, seed=9)
    assert first.run_once() == "ok"

    other_dir = tmp_path / "elsewhere"
    restarted, published, _ = make(tmp_path, store, migrated_url, model_dir=other_dir)
    restarted.resume()  # e.g. the model volume was lost: the samples must be retrained
    assert restarted.run_once() == "ok"
    assert read_current_version(other_dir) == published[0].version


def test_retrain_scores_the_p90s_served_since_the_last_one(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    """live_* come from the predictions the EPP sent back with the rows that arrived since
    the previous retrain; regimes and the window limit are recorded with every retrain."""
    store = SampleStore(store.engine, test_ratio=0.1, rng=random.Random(5))  # fixed split
    retrainer, _, metrics = make(tmp_path, store, migrated_url, model_dir=model_dir)
    add(store, 400, seed=1)  # no predicted_* fields: nothing live to score
    assert retrainer.run_once() == "ok"
    first = store.list_retrains()[0]
    ttft = first.targets[Target.TTFT]
    assert ttft.live_rows == 0 and ttft.live_coverage is None
    assert first.window_limit == 100_000
    assert first.regimes is not None and set(first.regimes) == {"ttft", "tpot"}
    assert {"queued", "not_queued", "pod_type=monolithic"} <= set(first.regimes["ttft"])
    assert all(0 <= r["coverage"] <= 1 and r["n"] > 0 for r in first.regimes["ttft"].values())

    rows = synthetic_rows(200, seed=2)
    for i, row in enumerate(rows):
        for t in TARGETS:  # every 4th row's served p90 was too low
            row[t.predicted_field] = row[t.actual_field] * (0.5 if i % 4 == 0 else 2.0)
    store.add_samples([TrainingEntry.model_validate(r) for r in rows])
    assert retrainer.run_once() == "ok"
    second = store.list_retrains()[0]
    for t in TARGETS:
        scored = [i for i, r in enumerate(rows) if r[t.actual_field] > 0]
        misses = sum(1 for i in scored if i % 4 == 0)
        scores = second.targets[t]
        assert scores.live_rows == len(scored)
        assert scores.live_coverage == pytest.approx(1 - misses / len(scored))
        assert scores.live_pinball_loss is not None and scores.live_pinball_loss > 0
        assert scores.raw_coverage is not None
        assert scores.calibration_log_offset is not None
        assert metrics.registry.get_sample_value(
            "latency_retrain_metric", {"target": t.value, "metric": "live_coverage"}
        ) == pytest.approx(scores.live_coverage)
    assert second.regimes is not None
    regime = next(iter(second.regimes["tpot"]))
    assert (
        metrics.registry.get_sample_value(
            "latency_retrain_regime_coverage", {"target": "tpot", "regime": regime}
        )
        == second.regimes["tpot"][regime]["coverage"]
    )
    assert metrics.registry.get_sample_value("latency_training_window_limit") == 100_000


def test_the_chosen_model_and_every_candidates_loss_are_recorded(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    """The retrains table names the candidate each target served (the running
    p90 below the trees' minimum, a tree model once one beats it) and keeps the out-of-fold
    loss of every candidate; /metrics marks the served one."""
    retrainer, published, metrics = make(tmp_path, store, migrated_url, model_dir=model_dir)
    add(store, 60, seed=3)  # ~27 rows per target: below min_samples (50), the p90 alone
    assert retrainer.run_once() == "ok"
    first = store.list_retrains()[0]
    assert first.targets[Target.TTFT].model_choice in ("p90", "p90_per_queued")
    assert first.targets[Target.TPOT].model_choice == "p90"
    assert first.model_candidates is not None
    assert first.model_candidates["ttft"].keys() == {"p90", "p90_per_queued"}
    assert first.model_candidates["tpot"].keys() == {"p90"}
    add(store, 1500, seed=4)
    assert retrainer.run_once() == "ok"
    second = store.list_retrains()[0]
    assert second.model_candidates is not None
    for t in TARGETS:
        losses = second.model_candidates[t.value]
        chosen = second.targets[t].model_choice
        assert chosen is not None and len(losses) >= 3 and losses[chosen] == min(losses.values())
        assert chosen.startswith("trees_")  # the synthetic latencies follow their features
        assert (
            metrics.registry.get_sample_value(
                "latency_model_choice", {"target": t.value, "candidate": chosen}
            )
            == 1
        )
        assert (
            metrics.registry.get_sample_value(
                "latency_model_choice", {"target": t.value, "candidate": "p90"}
            )
            == 0
        )
    assert published[-1].spaces[Target.TTFT].value == "log_ms_per_queued"


def test_after_a_large_shift_the_retrains_fit_the_rows_since_once_enough_arrived(
    tmp_path: Path, store: SampleStore, migrated_url: str, model_dir: Path
) -> None:
    """The live factor saw TPOT move to a new level from row `since` on (fit_since): rows
    before it must not drag the model back, but a fit of a few rows is rougher than all
    rows and the factor together, so it waits for FIT_SINCE_MIN_ROWS. TTFT fits all rows."""
    add(store, 600, seed=5)
    since = store.max_sample_id() + 1
    retrainer, _, _ = make(tmp_path, store, migrated_url, model_dir=model_dir)
    retrainer.fit_since = lambda target: since if target is Target.TPOT else 0

    def fitted() -> dict[Target, int | None]:
        record = store.list_retrains(limit=1)[0]
        return {t: record.targets[t].train_samples for t in TARGETS}

    def stored() -> dict[Target, int]:
        counts = store.counts().as_json()["training_data"]
        return {t: counts[f"{t.value}_samples"] for t in TARGETS}

    add(store, 100, seed=6)  # too few of the new level yet: every row
    assert retrainer.run_once() == "ok", retrainer.state.last_error
    assert fitted() == stored()

    add(store, 1_500, seed=7)
    assert retrainer.run_once() == "ok", retrainer.state.last_error
    new_level = len(store.window(Target.TPOT, test=False, since_id=since)[1])
    assert FIT_SINCE_MIN_ROWS <= new_level < stored()[Target.TPOT]
    assert fitted() == {Target.TTFT: stored()[Target.TTFT], Target.TPOT: new_level}
