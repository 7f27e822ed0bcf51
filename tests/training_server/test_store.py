"""SampleStore on a migrated SQLite file and a migrated PostgreSQL schema (the store fixture)."""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select, text

from shared.schemas import TrainingEntry
from shared.targets import TARGETS, Target
from training_server.retrain_record import Outcome, RetrainRecord, TargetRecord, to_columns
from training_server.store import SampleStore, bucket_of
from training_server.tables import retrains, samples


def entry(
    ttft: float = 0.0, tpot: float = 0.0, *, kv: float = 0.3, prefix: float = 0.0, **extra: Any
) -> TrainingEntry:
    row = {
        "kv_cache_percentage": kv,
        "input_token_length": 100,
        "num_request_waiting": 0,
        "num_request_running": 1,
        "num_tokens_generated": 1,
        "prefix_cache_score": prefix,
        "actual_ttft_ms": ttft,
        "actual_tpot_ms": tpot,
    }
    row.update(extra)
    return TrainingEntry.model_validate(row)


def split(store: SampleStore, ratio: float) -> SampleStore:
    """Another store on the same database with a deterministic split (0: train, 1: test)."""
    return SampleStore(store.engine, test_ratio=ratio)


def ids(store: SampleStore, **where: Any) -> list[int]:
    stmt = select(samples.c.id).order_by(samples.c.id)
    for name, value in where.items():
        stmt = stmt.where(samples.c[name] == value)
    with store.engine.connect() as conn:
        return list(conn.execute(stmt).scalars())


def retrain_record(
    version: str | None, status: Outcome = Outcome.OK, **extra: Any
) -> RetrainRecord:
    values: dict[str, Any] = {
        "version": version,
        "started_at": datetime.now(UTC),
        "duration_s": 1.5,
        "status": status,
        "model_type": "xgboost",
        "objective": "quantile",
        "quantile": 0.9,
        "max_sample_id": 7,
    }
    values.update(extra)
    return RetrainRecord(**values)


ZERO = {"ttft_samples": 0, "tpot_samples": 0, "total_samples": 0}


def test_counts_by_measured_target(store: SampleStore) -> None:
    train = split(store, 0.0)
    added = train.add_samples(
        [entry(ttft=10.0), entry(tpot=5.0), entry(ttft=12.0, tpot=6.0), entry(), entry(ttft=3.0)]
    )
    assert added == 5
    assert train.counts().as_json() == {
        "training_data": {"ttft_samples": 3, "tpot_samples": 2, "total_samples": 5},
        "test_data": ZERO,
    }


def test_counts_of_test_split(store: SampleStore) -> None:
    split(store, 1.0).add_samples([entry(ttft=10.0), entry(tpot=5.0), entry(tpot=7.0)])
    assert store.counts().as_json() == {
        "training_data": ZERO,
        "test_data": {"ttft_samples": 1, "tpot_samples": 2, "total_samples": 3},
    }


def test_split_ratio_puts_about_half_in_test(store: SampleStore) -> None:
    halves = SampleStore(store.engine, test_ratio=0.5, rng=random.Random(1))
    halves.add_samples([entry(ttft=float(i + 1)) for i in range(400)])
    counts = halves.counts().as_json()
    assert counts["training_data"]["total_samples"] + counts["test_data"]["total_samples"] == 400
    assert 150 <= counts["test_data"]["total_samples"] <= 250, counts


def test_window_returns_only_rows_measuring_the_target(store: SampleStore) -> None:
    train = split(store, 0.0)
    train.add_samples(
        [
            entry(ttft=11.0, kv=0.1, input_token_length=10, pod_type="prefill"),
            entry(tpot=4.0, kv=0.2, input_token_length=20, pod_type="decode"),
            entry(ttft=13.0, tpot=5.0, kv=0.3, input_token_length=30, pod_type=" Decode "),
            entry(
                ttft=14.0,
                kv=0.4,
                input_token_length=40,
                pod_type="prefill-decode",
                prefill_tokens_in_flight=7,
                encoder_input_size=9,
            ),
            entry(kv=0.5, input_token_length=50),  # measures nothing
        ]
    )
    split(store, 1.0).add_samples([entry(ttft=99.0, input_token_length=99)])

    columns, y = train.window(Target.TTFT, test=False)
    np.testing.assert_array_equal(y, [11.0, 13.0, 14.0])
    np.testing.assert_array_equal(columns["input_token_length"], [10, 30, 40])
    np.testing.assert_allclose(columns["kv_cache_percentage"], [0.1, 0.3, 0.4])
    np.testing.assert_array_equal(columns["prefill_tokens_in_flight"], [0, 0, 7])
    np.testing.assert_array_equal(columns["encoder_input_size"], [0, 0, 9])
    # "prefill" -> 1, " Decode " -> 2 (trimmed, case-folded), any other label -> 0
    np.testing.assert_array_equal(columns["pod_type_code"], [1.0, 2.0, 0.0])

    columns, y = train.window(Target.TPOT, test=False)
    np.testing.assert_array_equal(y, [4.0, 5.0])
    np.testing.assert_array_equal(columns["input_token_length"], [20, 30])
    np.testing.assert_array_equal(columns["pod_type_code"], [2.0, 2.0])

    columns, y = train.window(Target.TTFT, test=True)
    np.testing.assert_array_equal(y, [99.0])
    np.testing.assert_array_equal(columns["input_token_length"], [99])


def test_window_of_an_empty_split_is_empty(store: SampleStore) -> None:
    split(store, 0.0).add_samples([entry(ttft=10.0)])
    columns, y = store.window(Target.TTFT, test=True)
    assert len(y) == 0 and len(columns["input_token_length"]) == 0


def test_window_limit_keeps_the_newest_rows_oldest_first(store: SampleStore) -> None:
    split(store, 0.0).add_samples([entry(ttft=float(v)) for v in range(1, 8)])
    _, y = store.window(Target.TTFT, test=False, limit=3)
    np.testing.assert_array_equal(y, [5.0, 6.0, 7.0])


def test_max_sample_id_grows(store: SampleStore) -> None:
    assert store.max_sample_id() == 0
    store.add_samples([entry(ttft=1.0), entry(ttft=2.0)])
    first = store.max_sample_id()
    assert first == max(ids(store)) and first >= 2
    store.add_samples([entry(tpot=1.0)])
    assert store.max_sample_id() > first


def test_retention_keeps_newest_per_measures_and_bucket(store: SampleStore) -> None:
    train = split(store, 0.0)
    assert bucket_of(0.05, 0.0) != bucket_of(0.95, 0.9)
    train.add_samples([entry(ttft=float(i + 1), kv=0.05) for i in range(5)])
    ttft_a = ids(store)
    train.add_samples([entry(tpot=float(i + 1), kv=0.05) for i in range(3)])
    tpot_a = ids(store)[5:]
    train.add_samples([entry(ttft=float(i + 1), kv=0.95, prefix=0.9) for i in range(2)])
    ttft_b = ids(store)[8:]

    assert train.enforce_retention(per_bucket=2, test_total=100) == 4
    assert ids(store) == ttft_a[-2:] + tpot_a[-2:] + ttft_b
    assert train.enforce_retention(per_bucket=2, test_total=100) == 0


def test_retention_caps_test_rows_per_measures_across_buckets(store: SampleStore) -> None:
    train, test = split(store, 0.0), split(store, 1.0)
    train.add_samples([entry(ttft=1.0, kv=0.05) for _ in range(3)])
    kept_train = ids(store)
    test.add_samples([entry(ttft=float(i + 1), kv=0.1 * i) for i in range(4)])  # 4 buckets
    test.add_samples([entry(tpot=float(i + 1)) for i in range(3)])
    test_ttft = ids(store, is_test=True, measures=1)
    test_tpot = ids(store, is_test=True, measures=2)

    assert store.enforce_retention(per_bucket=10, test_total=2) == 3
    assert ids(store, is_test=False) == kept_train
    assert ids(store, is_test=True, measures=1) == test_ttft[-2:]
    assert ids(store, is_test=True, measures=2) == test_tpot[-2:]


def test_flush_training_only_keeps_test_rows(store: SampleStore) -> None:
    split(store, 0.0).add_samples(
        [entry(ttft=1.0), entry(ttft=2.0), entry(tpot=3.0), entry(ttft=6.0, tpot=7.0)]
    )
    split(store, 1.0).add_samples([entry(ttft=4.0), entry(tpot=5.0)])
    flushed = store.flush(training=True, test=False)
    # A row measuring both targets counts once in the row total.
    assert flushed == {
        "samples_flushed": 4,
        "ttft_training_samples_flushed": 3,
        "tpot_training_samples_flushed": 2,
        "ttft_test_samples_flushed": 0,
        "tpot_test_samples_flushed": 0,
    }
    assert store.counts().as_json() == {
        "training_data": ZERO,
        "test_data": {"ttft_samples": 1, "tpot_samples": 1, "total_samples": 2},
    }
    assert store.flush(training=True, test=True) == {
        "samples_flushed": 2,
        "ttft_training_samples_flushed": 0,
        "tpot_training_samples_flushed": 0,
        "ttft_test_samples_flushed": 1,
        "tpot_test_samples_flushed": 1,
    }
    assert ids(store) == []


def test_record_and_list_retrains_newest_first(store: SampleStore) -> None:
    ttft = TargetRecord(mae=1.25, train_samples=40)
    first = store.record_retrain(retrain_record("v1", targets={Target.TTFT: ttft}))
    second = store.record_retrain(retrain_record(None, status=Outcome.FAILED, error="boom"))
    third = store.record_retrain(retrain_record("v3"))
    assert first < second < third

    rows = store.list_retrains()
    assert [r.id for r in rows] == [third, second, first]
    oldest = rows[-1]
    assert (oldest.version, oldest.status, oldest.targets[Target.TTFT].mae) == ("v1", "ok", 1.25)
    assert (oldest.targets[Target.TTFT].train_samples, oldest.max_sample_id) == (40, 7)
    assert oldest.targets[Target.TPOT] == TargetRecord()  # every target, empty when unknown
    assert (rows[1].status, rows[1].error, rows[1].version) == ("failed", "boom", None)

    assert [r.id for r in store.list_retrains(limit=1, offset=1)] == [second]
    assert [r.version for r in store.list_retrains(ok_only=True)] == ["v3", "v1"]
    assert store.list_retrains(limit=1, ok_only=True)[0].version == "v3"

    assert store.clear_retrains() == 3
    assert store.list_retrains() == []


def test_retrain_started_at_round_trips_as_aware_utc(
    store: SampleStore,
) -> None:
    started = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)
    store.record_retrain(retrain_record("v1", started_at=started))
    got = store.list_retrains()[0].started_at
    assert got.tzinfo is not None and got.utcoffset() == timedelta(0)
    assert got == started


def full_record() -> RetrainRecord:
    """A retrain with every field known, each target's values its own."""
    targets = {
        t: TargetRecord(
            train_samples=100 + i,
            test_samples=10 + i,
            mae=1.5 + i,
            rmse=2.5 + i,
            pinball_loss=0.25 + i,
            coverage=0.875,
            violation_rate=0.125,
            raw_coverage=0.75,
            calibration_log_offset=0.0625 + i,
            live_coverage=0.5,
            live_pinball_loss=3.5 + i,
            live_rows=7 + i,
            model_choice=f"trees_{i}",
        )
        for i, t in enumerate(TARGETS)
    }
    return retrain_record(
        "v1",
        error=None,
        trainer="host:1",
        window_limit=5000,
        targets=targets,
        regimes={"ttft": {"queued": {"n": 3, "coverage": 1.0}}},
        model_candidates={t.value: {"p90": 9.5, f"trees_{i}": 1.5} for i, t in enumerate(TARGETS)},
    )


def test_a_retrain_record_round_trips_through_its_row(store: SampleStore) -> None:
    """Every field of the record is a column (and every column but the key a field)."""
    record = full_record()
    key = store.record_retrain(record)
    (got,) = store.list_retrains()
    assert got == replace(record, id=key)
    columns = to_columns(record)
    assert list(columns) == [c.name for c in retrains.columns if c.name != "id"]
    assert columns["tpot_live_rows"] == 8 and columns["ttft_model_choice"] == "trees_0"
    assert [k for k, v in columns.items() if v is None] == ["error"]


def test_unknown_json_values_are_stored_as_sql_nulls(store: SampleStore) -> None:
    store.record_retrain(retrain_record(None, status=Outcome.FAILED, error="boom"))
    with store.engine.connect() as conn:
        query = "SELECT regimes IS NULL, model_candidates IS NULL, window_limit FROM retrains"
        stored = conn.execute(text(query)).one()
    assert tuple(stored) == (True, True, None)  # not JSON 'null


@pytest.mark.parametrize(
    ("kv", "prefix", "bucket"),
    [
        (0.0, 0.0, 0),
        (0.05, 0.3, 1),  # kv decile 0, prefix quarter 1
        (0.1, 0.0, 4),  # kv decile 1 -> 1 * 4
        (0.25, 0.75, 11),  # 2 * 4 + 3
        (0.55, 0.5, 22),  # 5 * 4 + 2
        (0.99, 0.99, 39),  # 9 * 4 + 3
        (1.0, 1.0, 39),  # the top edge clamps into the last bucket
    ],
)
def test_bucket_of(kv: float, prefix: float, bucket: int) -> None:
    assert bucket_of(kv, prefix) == bucket
