"""Live calibration: the leading trainer scoring stored rows, following a shift and a new
bundle, and publishing the file that prediction servers follow (the factor's own moves:
test_live_factor)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from devkit.synthetic import synthetic_rows
from shared.features import columns_from_dicts
from shared.live_calibration import (
    NO_LIVE_OFFSETS,
    LiveCalibrationReader,
    read_live_calibration,
)
from shared.prior import prior_predict
from shared.targets import Target
from tests.apps import app_of
from tests.conftest import training_settings
from tests.polling import eventually
from tests.training_server.conftest import OpenClient, ingest, published_of, tick, train
from training_server.app import create_app
from training_server.retrain.live_factor import conformal_log_offset
from training_server.retrain.rebase_rows import REBASE_MIN_ROWS
from training_server.retrain.served_gap import MAX_LEVEL_GAP


def slower_rows(n: int, seed: int, scale: float, served: bool = True) -> list[dict[str, Any]]:
    """Synthetic rows whose actuals are `scale` x the level the bundle learnt (the pods
    slowed down), carrying the p90 the EPP was served, half the actual (all missed)."""
    rows = synthetic_rows(n, seed=seed)
    for row in rows:
        for t in Target:
            row[t.actual_field] *= scale
            if served:
                row[t.predicted_field] = row[t.actual_field] * 0.5 or 123.0
    return rows


def test_the_factor_follows_slower_pods_and_is_published(open_client: OpenClient) -> None:
    """Rows 4x slower than the bundle learnt: the leader scores what the bundle answers for
    them now, finds the shift, sets the factor to about 4x, publishes it, and the trainer's
    own predict route serves it at once; the EPP's served p90s give recent_coverage."""
    client = open_client(calibration_step=0.01)
    train(client)  # a trained bundle: both targets get corrected
    tick(client)  # the first tick resumes at the newest row: history is not re-scored
    assert all(e.log_offset == 0.0 for e in published_of(client).targets.values())
    before = client.post("/predict", json=_epp_row()).json()

    ingest(client, slower_rows(200, seed=5, scale=4.0))
    tick(client)
    published = published_of(client)
    for target, entry in published.targets.items():
        n = sum(1 for r in slower_rows(200, 5, 4.0) if r[target.actual_field] > 0)
        assert entry.rows == n and entry.recent_coverage == 0.0  # the EPP's p90s: all missed
        assert entry.log_offset == pytest.approx(math.log(4.0), abs=0.5)
    after = client.post("/predict", json=_epp_row()).json()
    offset = published.targets[Target.TTFT].log_offset
    assert after["ttft_ms"] == pytest.approx(before["ttft_ms"] * math.exp(offset), rel=1e-6)
    metrics = client.get("/metrics").text
    assert 'latency_live_calibration_log_offset{target="ttft"}' in metrics
    assert 'latency_live_coverage{target="tpot"} 0.0' in metrics
    assert 'latency_live_shifts_total{target="ttft"} 1.0' in metrics
    assert client.get("/calibration").json()["through_sample_id"] == published.through_sample_id


def test_rows_are_scored_against_a_trained_model_with_or_without_a_served_p90(
    open_client: OpenClient,
) -> None:
    """The prior is never corrected; once a model is served, rows from an EPP that sends no
    `predicted_*_ms` (llm-d's) still move the factor, and leave recent_coverage unset."""
    client = open_client(calibration_step=0.001)  # the steps alone: at most 0.1 here
    assert client.post("/retrain").json()["outcome"] == "skipped"  # leads, nothing to fit
    tick(client)  # nothing trained yet: the prior is never corrected
    ingest(client, slower_rows(100, seed=6, scale=4.0))
    tick(client)
    published = published_of(client)
    assert published.through_sample_id > 0
    assert all(e.rows == 0 and e.log_offset == 0.0 for e in published.targets.values())
    train(client, seed=7)
    tick(client)  # its 400 rows arrived since the last step, but the bundle was fitted on them
    assert all(e.rows == 0 for e in published_of(client).targets.values())
    ingest(client, slower_rows(200, seed=8, scale=4.0, served=False))
    tick(client)
    for entry in published_of(client).targets.values():
        assert entry.rows > 0 and entry.recent_coverage is None
        # a shift followed: the steps alone move it by at most 0.1 here (the bundle also
        # learnt the 100 slow rows, so it needs less than 4x: 0.24-0.3 by the model chosen)
        assert entry.log_offset > 0.15


def test_off_removes_a_stale_file_and_never_publishes(open_client: OpenClient) -> None:
    leader = open_client(name="a")
    train(leader)
    tick(leader)
    model_dir = app_of(leader).state.settings.model_dir
    assert read_live_calibration(model_dir) is not None
    off = open_client(name="b", model_dir=model_dir, calibration="split")
    app_of(off).state.pools.default.calibrator.start()
    assert read_live_calibration(model_dir) is None
    ingest(off, slower_rows(100, seed=8, scale=4.0))
    tick(off)
    assert read_live_calibration(model_dir) is None


def test_reader_follows_replacements_and_keeps_the_last_good_file(
    open_client: OpenClient,
) -> None:
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    model_dir = app_of(client).state.settings.model_dir
    reader = LiveCalibrationReader(model_dir)
    assert reader.poll() and not reader.poll()  # read once, then unchanged
    ingest(client, slower_rows(100, seed=9, scale=4.0))
    tick(client)
    assert reader.poll() and reader.log_offsets(0.9).pool[Target.TTFT] > 0
    assert (
        reader.log_offsets(0.5) == NO_LIVE_OFFSETS
    )  # a factor for another quantile is never served
    good = reader.current
    (model_dir / "calibration.json").write_text('{"format_version": 1, "quantile": "x"}')
    with pytest.raises(ValueError, match=r"calibration\.json"):
        reader.poll()
    assert reader.current is good


def test_a_newer_trainers_file_is_read_for_the_fields_known_and_a_newer_format_refused(
    tmp_path: Path,
) -> None:
    """Trainers and prediction servers are updated in no set order: a field this release
    does not know is skipped; a newer format (a known field that changed meaning) is not
    served at all, and the last file read stays."""
    entry = {"log_offset": 0.25, "rows": 10, "from_a_later_release": 1.0}
    doc = {
        "updated_at": "2026-12-06T10:00:00Z",
        "quantile": 0.9,
        "through_sample_id": 7,
        "targets": {"ttft": entry, "tpot": entry},
        "groups": {"decode": {"tpot": entry}},
        "a_later_field": {"x": 1},
    }
    (tmp_path / "calibration.json").write_text(json.dumps(doc))
    reader = LiveCalibrationReader(tmp_path)
    assert reader.poll()
    offsets = reader.log_offsets(0.9)
    assert offsets.pool[Target.TTFT] == 0.25 and offsets.groups["decode"][Target.TPOT] == 0.25
    good = reader.current
    (tmp_path / "calibration.json").write_text(json.dumps({**doc, "format_version": 2}))
    with pytest.raises(ValueError, match="format_version"):
        reader.poll()
    assert reader.current is good


def _epp_row() -> dict[str, Any]:
    row = {k: v for k, v in synthetic_rows(1, seed=11)[0].items() if not k.startswith("actual_")}
    return row


def _rebase_rows(
    state: Any, target: Target, old_through: int, fitted_around: bool
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """The held-out rows a rebase of `target` compares the bundles on, as the test expects
    them: up to the old bundle's watermark (`fitted_around`), or the newest of the level."""
    if fitted_around:
        columns, actual = state.store.window(
            target, test=True, limit=REBASE_MIN_ROWS, through_id=old_through
        )
        assert len(actual) == REBASE_MIN_ROWS
        return columns, actual
    since = state.calibrator.level_since(target)
    columns, actual = state.store.window(target, test=True, limit=200, since_id=since)
    if len(actual) < REBASE_MIN_ROWS:  # here the newest 20 of one big batch
        columns, actual = state.store.window(target, test=True, limit=REBASE_MIN_ROWS)
    assert 0 < len(actual) <= REBASE_MIN_ROWS
    return columns, actual


def test_a_new_bundle_rebases_the_factor_so_the_served_p90_stays_put(
    open_client: OpenClient,
) -> None:
    """After the factor followed rows 3x slower, a retrain on them moves the bundle's own
    answers up: on the next tick the factor comes down by what the new bundle needs less
    than the old one to cover the same held-out rows (their 0.9 conformal quantiles),
    instead of counting the move twice. Which rows (retrain.rebase_rows): TPOT's are the
    newest of the factor's level; TTFT's are rows the old bundle's training had the
    neighbours of too (up to its watermark), where the new one cannot look better than it
    will be on the next."""
    client = open_client(calibration_step=0.01)
    train(client, n=1_500)  # over REBASE_MIN_ROWS held-out rows of each target
    tick(client)
    ingest(client, slower_rows(600, seed=12, scale=3.0))
    tick(client)
    state = app_of(client).state.pools.default
    old = state.calibrator.slot.published
    old_through = state.retrainer.state.trained_through
    before = published_of(client)
    assert old is not None and before.targets[Target.TTFT].log_offset > math.log(2.0)
    assert client.post("/retrain").json()["outcome"] == "ok"
    new = state.calibrator.slot.published
    assert new is not None and new.version != old.version
    tick(client)  # no new rows: only the rebase
    after = published_of(client)
    for target in Target:
        assert state.calibrator.level_since(target) > old_through  # followed as a shift
        columns, actual = _rebase_rows(state, target, old_through, target is Target.TTFT)
        needed = [
            conformal_log_offset(
                np.log(actual / b.with_live(NO_LIVE_OFFSETS).predict(columns)[target]), 0.9
            )
            for b in (old, new)
        ]
        assert needed[1] < needed[0]  # the new bundle answers higher: the factor gives that back
        expected = before.targets[target].log_offset + needed[1] - needed[0]
        assert after.targets[target].log_offset == pytest.approx(expected, abs=1e-9)


def test_rows_a_retrain_read_before_the_step_are_scored_against_the_bundle_that_served_them(
    open_client: OpenClient,
) -> None:
    """Rows 3x slower arrive and a retrain reads them before the leader's next step, as the
    last second's rows before every retrain do: the step scores them against the bundle
    that served them (all too slow: a shift), then rebases on the new bundle, so the p90s
    served now cover the slow rows. Left out, they never reached the factor, and the rebase
    alone moved it down, by what the new bundle needs less than the old on those rows."""
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    state = app_of(client).state.pools.default
    slow_since = state.store.max_sample_id() + 1
    ingest(client, slower_rows(600, seed=12, scale=3.0))
    assert client.post("/retrain").json()["outcome"] == "ok"
    tick(client)
    published = published_of(client)
    for target in Target:
        assert state.calibrator.level_since(target) >= slow_since  # a shift, on those rows
        columns, actual = state.store.window(target, test=True, limit=200, since_id=slow_since)
        assert len(actual) >= 10
        bundle = state.calibrator.slot.published
        assert bundle is not None
        answers = bundle.with_live(NO_LIVE_OFFSETS).predict(columns)[target]
        served = answers * math.exp(published.targets[target].log_offset)
        assert np.mean(actual <= served) >= 0.5  # 0.75-0.9 here; without: 0.06
    # The pool's TPOT blend took them in too: its level is a p90 of the slow rows alone
    # (the shift restarted it there), where without them it would have none.
    slow = state.store.served_since(slow_since - 1, limit=10_000).actual[Target.TPOT]
    level = published.targets[Target.TPOT].blend_level_ms
    assert np.quantile(slow[slow > 0], 0.5) < level <= slow.max()


def classed(rows: list[dict[str, Any]], pod_class: str, pod_type: str = "") -> list[dict[str, Any]]:
    """The rows as from pods of one class (and role: "" monolithic)."""
    return [{**row, "pod_class": pod_class, "pod_type": pod_type} for row in rows]


def test_each_class_gets_a_factor_of_its_own(open_client: OpenClient) -> None:
    """One class slows 4x, the other does not: the slow class's factor follows it, the
    other's stays near 1, the pool's lands in between; the predict route serves each row
    its class's factor, the pool's to a row without a class."""
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    before = client.post("/predict", json=_epp_row()).json()
    slow = classed(slower_rows(200, seed=5, scale=4.0), " Slow")  # stored as sent
    ingest(client, slow + classed(slower_rows(200, seed=6, scale=1.0), "fast"))
    tick(client)
    published = published_of(client)
    assert set(published.groups) == {"slow", "fast"}
    for target, pool in published.targets.items():
        slow_offset = published.groups["slow"][target].log_offset
        fast_offset = published.groups["fast"][target].log_offset
        assert slow_offset == pytest.approx(math.log(4.0), abs=0.5)
        assert abs(fast_offset) < 0.3
        assert fast_offset < pool.log_offset < slow_offset
        n = sum(1 for r in slow if r[target.actual_field] > 0)
        assert published.groups["slow"][target].rows == n
        assert published.groups["slow"][target].recent_coverage == 0.0
    offsets = {t: e.log_offset for t, e in published.targets.items()}
    for pod_class, offset in [
        ("SLOW", published.groups["slow"][Target.TTFT].log_offset),
        ("fast", published.groups["fast"][Target.TTFT].log_offset),
        ("", offsets[Target.TTFT]),
    ]:
        after = client.post("/predict", json={**_epp_row(), "pod_class": pod_class}).json()
        assert after["ttft_ms"] == pytest.approx(before["ttft_ms"] * math.exp(offset), rel=1e-6)
    metrics = client.get("/metrics").text
    assert 'latency_live_calibration_group_log_offset{group="slow",target="ttft"}' in metrics


def test_a_pool_of_one_class_serves_what_the_pool_factor_would(
    open_client: OpenClient,
) -> None:
    """Every row of one class: its factor moves exactly as the pool's, through a shift, the
    steps after it and the rebase on a new bundle."""
    client = open_client(calibration_step=0.01)

    def retrain(seed: int) -> None:
        ingest(client, classed(synthetic_rows(400, seed=seed), "h200"))
        assert client.post("/retrain").json()["outcome"] == "ok"

    retrain(seed=10)
    tick(client)
    for seed in (11, 12):
        ingest(client, classed(slower_rows(150, seed=seed, scale=3.0), "h200"))
        tick(client)
        retrain(seed=seed + 10)
        tick(client)
        published = published_of(client)
        for target, pool in published.targets.items():
            assert published.groups["h200"][target].log_offset == pool.log_offset
            assert pool.log_offset != 0.0  # the factors did move


def test_prefill_and_decode_rows_get_factors_of_their_own(open_client: OpenClient) -> None:
    """A P/D pool: the prefill pods' TTFTs run 4x what the bundle learnt, the decode pods'
    as learnt; each role's factor follows its own rows (no class: groups "prefill" and
    "decode")."""
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    prefill = classed(slower_rows(200, seed=5, scale=4.0), "", "prefill")
    decode = classed(slower_rows(200, seed=6, scale=1.0), "", "Decode")
    ingest(client, prefill + decode)
    tick(client)
    published = published_of(client)
    assert set(published.groups) == {"prefill", "decode"}
    ttft = Target.TTFT
    assert published.groups["prefill"][ttft].log_offset == pytest.approx(math.log(4), abs=0.5)
    assert abs(published.groups["decode"][ttft].log_offset) < 0.3
    row = {**_epp_row(), "pod_class": ""}
    prefill_p90 = client.post("/predict", json={**row, "pod_type": "prefill"}).json()["ttft_ms"]
    decode_p90 = client.post("/predict", json={**row, "pod_type": "decode"}).json()["ttft_ms"]
    # the same features but the role's code: the answers differ by the two factors (the
    # bundle, trained on rows of random roles, may answer the roles a little apart)
    assert prefill_p90 > 2 * decode_p90


def served_at(
    rows: list[dict[str, Any]], low: float, high: float, seed: int
) -> list[dict[str, Any]]:
    """`rows` with the p90 the EPP acted on between `low` and `high` x each actual."""
    rng = np.random.default_rng(seed)
    for row in rows:
        for t in Target:
            if row[t.actual_field] > 0:
                row[t.predicted_field] = row[t.actual_field] * float(rng.uniform(low, high))
    return rows


def served_by_the_prior(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`rows` with the cold-start prior's answer as the p90 the EPP acted on."""
    for row in rows:
        for t in Target:
            if row[t.actual_field] > 0:
                row[t.predicted_field] = float(prior_predict(t, columns_from_dicts([row]))[0])
    return rows


def test_the_served_p90s_move_a_gap_of_their_own_which_a_new_leader_resumes(
    open_client: OpenClient,
) -> None:
    """Rows at the level the bundle learnt, but the p90 the EPP acted on for every one of
    them was missed (served long before, at another level): the factor, scored on arrival,
    has nothing to follow; the gap, scored on what was served, rises from the first row a
    model served (rows the cold-start prior served say nothing of the models and move
    nothing), and the file serves the sum. A new leader resumes both parts where they
    stood."""
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    ingest(client, served_by_the_prior(synthetic_rows(400, seed=12)))
    tick(client)
    for entry in published_of(client).targets.values():
        assert (entry.served_level, entry.served_gap) == (0.0, 0.0)
    ingest(client, served_at(synthetic_rows(600, seed=13), 0.3, 0.9, 14))
    tick(client)
    for entry in published_of(client).targets.values():
        assert entry.served_level == MAX_LEVEL_GAP
        assert entry.served_gap > 0.0
        assert entry.log_offset == pytest.approx(entry.factor_log_offset + entry.served_gap)

    app_of(client).state.pools.default.calibrator.state = None  # as a new leader starts
    tick(client)
    ingest(client, served_at(synthetic_rows(200, seed=15), 1.5, 2.0, 16))  # all covered
    tick(client)
    for target, entry in published_of(client).targets.items():
        covered = sum(1 for r in synthetic_rows(200, seed=15) if r[target.actual_field] > 0)
        # no rows skipped, and the level steps down from where it stood
        assert entry.served_level == pytest.approx(MAX_LEVEL_GAP - 0.001 * 0.1 * covered)


def test_a_large_shift_tells_the_retrains_where_tpot_rows_start_which_a_new_leader_keeps(
    open_client: OpenClient,
) -> None:
    """Rows 4x slower: both factors shift far. TPOT's new level starts among the new rows,
    published as fit_since for the retrains and resumed by a new leader; TTFT never
    forgets (its load bursts shift it that far without drift)."""
    client = open_client(calibration_step=0.01)
    train(client)
    tick(client)
    calibrator = app_of(client).state.pools.default.calibrator
    first_new = app_of(client).state.pools.default.store.max_sample_id() + 1
    assert calibrator.fit_since(Target.TPOT) == 0
    ingest(client, slower_rows(200, seed=5, scale=4.0))
    tick(client)
    since = calibrator.fit_since(Target.TPOT)
    assert first_new <= since < first_new + 200
    published = published_of(client).targets
    assert (published[Target.TPOT].fit_since, published[Target.TTFT].fit_since) == (since, 0)
    assert calibrator.fit_since(Target.TTFT) == 0

    calibrator.state = None  # as a new leader starts
    tick(client)
    assert calibrator.fit_since(Target.TPOT) == since


def test_rows_arriving_step_the_live_factor_without_waiting_for_its_clock(
    tmp_path: Path,
) -> None:
    """The retrain loop steps a pool's live factor as soon as its rows are stored, not only
    on its clock (an hour here): the EPP's next predictions, a second after its flush,
    meet a factor that has seen the rows of the flush before."""
    settings = training_settings(
        tmp_path, f"sqlite:///{tmp_path / 'store.db'}", calibration_interval_sec=3600.0
    )
    with TestClient(create_app(settings, start_loop=True)) as client:
        ingest(client, synthetic_rows(20, seed=1))  # fewer than a retrain needs
        stored = eventually(
            lambda: read_live_calibration(settings.model_dir),
            10.0,
            "the first live step (the loop's first pass)",
        )
        first = stored.through_sample_id
        ingest(client, synthetic_rows(20, seed=2))
        eventually(
            lambda: (
                (c := read_live_calibration(settings.model_dir)) is not None
                and c.through_sample_id >= first + 20
            ),
            10.0,
            "a live step on the new rows",
        )
