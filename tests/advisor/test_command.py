"""`latency-predictor advise` as a process, against stores a real trainer filled."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import DBAPIError

from advisor.command import json_path
from advisor.rows import begin_read_only, open_read_only, read_rows
from devkit.processes import free_port
from shared.settings import TrainingSettings
from tests.advisor.conftest import Stores
from tests.advisor.stores import advise
from tests.conftest import PG_URL

SIX = ["heuristic", "token-load", "round-robin", "predicted-latency", "latency-first", "oracle"]
QUICK = ("--sim-seconds", "60", "--speedup", "20", "--slo-ttft-ms", "300", "--slo-tpot-ms", "40")


def snapshot(path: Path) -> tuple[str, int, list[str], int]:
    """The file's bytes (sha256) and mtime, the folder's files, the stored rows."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    files = sorted(p.name for p in path.parent.iterdir())
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as conn:
        rows = conn.execute("SELECT count(*) FROM samples").fetchone()[0]
    return digest, path.stat().st_mtime_ns, files, rows


def postgres_counts(url: str) -> tuple[int, int, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            samples = conn.execute(text("SELECT count(*), max(id) FROM samples")).one()
            retrains = conn.execute(text("SELECT count(*) FROM retrains")).scalar_one()
            return int(samples[0]), int(samples[1]), int(retrains)
    finally:
        engine.dispose()


def check_document(document: dict[str, Any], policies: list[str]) -> None:
    for key in (
        "verdict",
        "reason",
        "confidence",
        "rows",
        "minutes",
        "fit_error",
        "policies",
        "cost",
        "expected_change",
        "profile",
        "simulation",
        "elapsed_s",
    ):
        assert key in document, key
    assert document["verdict"] in ("enable", "little-gain")
    assert document["confidence"] in ("high", "low")
    assert document["rows"] >= 1200 and 11.5 <= document["minutes"] <= 12.5
    assert document["fit_error"]["cells"], "the pod model was checked per cell"
    assert list(document["policies"]) == policies
    for figures in document["policies"].values():
        assert figures["ttft_ms"]["p50"] > 0 and figures["ttft_ms"]["p90"] > 0
        assert figures["tpot_ms"]["p90"] > 0
        assert 0.0 <= figures["slo_attainment"] <= 1.0
    assert document["cost"]["prediction_workers"] >= 1
    assert document["expected_change"]["ttft_p90"]["baseline"] in SIX[:3]


def run_json(tmp_path: Path, *args: str) -> tuple[str, dict[str, Any]]:
    out = tmp_path / "advice.json"
    done = advise(*args, "--json", str(out))
    assert done.returncode == 0, done.stderr
    return done.stdout, json.loads(out.read_text())


def check_not_enough(stdout: str, document: dict[str, Any]) -> None:
    assert "verdict   not-enough-data" in stdout
    assert "rows in the window (need 1,000)" in stdout
    assert "minutes of traffic between the first and the last row (need 10)" in stdout
    assert document["verdict"] == "not-enough-data" and len(document["missing"]) == 2
    assert document["policies"] == {} and document["simulation"] is None
    assert document["elapsed_s"]["simulate_s"] == 0.0


def test_a_small_sqlite_store_is_not_enough_data(sqlite_stores: Stores, tmp_path: Path) -> None:
    check_not_enough(*run_json(tmp_path, "--db", sqlite_stores.small, "--pods", "2"))


@pytest.mark.postgres
def test_a_small_postgres_store_is_not_enough_data(postgres_stores: Stores, tmp_path: Path) -> None:
    check_not_enough(*run_json(tmp_path, "--db", postgres_stores.small, "--pods", "2"))


def test_a_full_answer_on_sqlite_writes_nothing(sqlite_stores: Stores, tmp_path: Path) -> None:
    assert sqlite_stores.file is not None
    before = snapshot(sqlite_stores.file)
    plots = tmp_path / "plots"
    args = ("--db", sqlite_stores.adequate, "--pods", "2", "--seeds", "0,1", *QUICK)
    stdout, document = run_json(tmp_path, *args, "--plots", str(plots))
    check_document(document, SIX)
    assert [len(p["seeds"]) for p in document["policies"].values()] == [2] * 6
    assert "| latency-first |" in stdout and "verdict   " in stdout and "cost      " in stdout
    assert sorted(p.name for p in plots.iterdir()) == ["traffic.png", "ttft_cdf.png"]
    assert snapshot(sqlite_stores.file) == before  # bytes, mtime, no -wal/-shm, rows


@pytest.mark.postgres
def test_a_full_answer_on_postgres_writes_nothing(postgres_stores: Stores, tmp_path: Path) -> None:
    before = postgres_counts(postgres_stores.adequate)
    policies = ["heuristic", "token-load", "latency-first", "oracle"]
    args = ("--db", postgres_stores.adequate, "--pods", "2", "--seeds", "0", *QUICK)
    _, document = run_json(tmp_path, *args, "--policies", ",".join(policies))
    check_document(document, policies)
    assert postgres_counts(postgres_stores.adequate) == before


def check_error(done: Any, code: int, words: str) -> None:
    assert done.returncode == code, done.stdout + done.stderr
    assert words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_store_that_cannot_be_read_exits_1(tmp_path: Path) -> None:
    missing = tmp_path / "missing.db"
    check_error(advise("--db", f"sqlite:///{missing}", "--pods", "2"), 1, "no SQLite store at")
    assert not missing.exists()
    bare = tmp_path / "bare.db"
    sqlite3.connect(bare).close()  # a database nobody migrated
    check_error(advise("--db", f"sqlite:///{bare}", "--pods", "2"), 1, "is not migrated")
    closed = f"postgresql+psycopg://postgres@127.0.0.1:{free_port()}/test"
    check_error(advise("--db", closed, "--pods", "2"), 1, "cannot read the store at")


@pytest.mark.postgres
def test_an_unmigrated_postgres_schema_exits_1(empty_schema_url: str) -> None:
    assert empty_schema_url.startswith(PG_URL)
    check_error(advise("--db", empty_schema_url, "--pods", "2"), 1, "is not migrated")


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--db", "sqlite:///x.db", "--pods", "0"], "--pods must be at least 1"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--seeds", "a,b"], "--seeds"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--hours", "-1"], "--hours must be positive"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--policies", "nope"], "unknown policy"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--slo-ttft-ms", "0"], "--slo-ttft-ms"),
        (["--db", "mysql://u@h/db", "--pods", "2"], "unsupported store"),
        (["--db", "not a url", "--pods", "2"], "not a database URL"),
        (["--training-url", "http://127.0.0.1:8000", "--pods", "2"], "no route that exports"),
        (["--pods", "2"], "one of the arguments --db --training-url is required"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--pool", "Bad_Name"], "--pool"),
        (["--db", "sqlite:///x.db"], "--pods is required"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--hardware", "gpu-x"], "--hardware: one of"),
        (["--db", "sqlite:///x.db", "--pods", "3", "--hardware", "h200:2,b200:2"], "but --pods"),
        (["--db", "sqlite:///x.db", "--hardware", "h200:2,gpu-x:2"], "unknown hardware class"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--json", "/a/{pool}.json"], "needs --pool"),
        (["--db", "sqlite:///x.db", "--pods", "2", "--json", "/a/"], "needs --pool"),
        (
            ["--db", "sqlite:///x.db", "--pods", "2", "--pool", "a", "--json", "/a/{name}.json"],
            "the only placeholder is {pool}",
        ),
    ],
)
def test_bad_flags_exit_2(args: list[str], words: str) -> None:
    done = advise(*args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


def refuses_writes(url: str) -> None:
    engine = open_read_only(url)
    try:
        with engine.connect() as conn:
            begin_read_only(conn)
            with pytest.raises(DBAPIError, match=r"(?i)read-?only"):
                conn.execute(text("DELETE FROM samples"))
    finally:
        engine.dispose()


def test_the_sqlite_connection_cannot_write(sqlite_stores: Stores) -> None:
    assert sqlite_stores.file is not None
    before = snapshot(sqlite_stores.file)
    refuses_writes(sqlite_stores.adequate)
    assert snapshot(sqlite_stores.file) == before


@pytest.mark.postgres
def test_the_postgres_transaction_cannot_write(postgres_stores: Stores) -> None:
    before = postgres_counts(postgres_stores.adequate)
    refuses_writes(postgres_stores.adequate)
    assert postgres_counts(postgres_stores.adequate) == before


def test_pool_reads_only_that_pools_rows(sqlite_stores: Stores) -> None:
    every = read_rows(sqlite_stores.adequate, 6.0)
    assert len(every.timestamp_s) > 1000
    assert len(read_rows(sqlite_stores.adequate, 6.0, pool="default").timestamp_s) == len(
        every.timestamp_s
    )
    assert len(read_rows(sqlite_stores.adequate, 6.0, pool="h200-llama").timestamp_s) == 0


def test_json_takes_the_trainers_pool_template() -> None:
    assert json_path("/advice/{pool}.json", "h200-llama") == Path("/advice/h200-llama.json")
    assert json_path("/advice/{pool}.json", None) == Path("/advice/default.json")
    assert json_path("/advice/a.json", "h200-llama") == Path("/advice/a.json")
    assert json_path("/advice/", "h200-llama") == Path("/advice/h200-llama.json")


def test_json_writes_where_the_trainer_reads_the_same_value(
    sqlite_stores: Stores, tmp_path: Path
) -> None:
    """A directory given to both: advise writes the pool's file, the trainer reads it."""
    value = f"{tmp_path / 'advice'}/"
    done = advise("--db", sqlite_stores.small, "--pods", "2", "--pool", "default", "--json", value)
    assert done.returncode == 0, done.stderr
    written = tmp_path / "advice" / "default.json"
    assert f"json: {written}" in done.stdout
    assert json.loads(written.read_text())["verdict"] == "not-enough-data"
    trainer = TrainingSettings.model_validate(
        {"model_dir": tmp_path / "models", "advice_file": value}
    )
    assert trainer.advice_path() == written


def test_a_mixed_store_rebuilds_its_classes(mixed_store: str, tmp_path: Path) -> None:
    """Rows of 2 h200 and 2 b200 pods, each naming its class: advise simulates both classes,
    two pods each, with speeds read from each class's rows, and says so."""
    policies = ["heuristic", "token-load", "oracle"]  # no predictor: fast
    args = ("--db", mixed_store, "--pods", "4", "--seeds", "0", *QUICK)
    stdout, document = run_json(tmp_path, *args, "--policies", ",".join(policies))
    classes = document["classes"]
    assert classes["from_rows"] and classes["split"] == "rows"
    by = {c["label"]: c for c in classes["per_class"]}
    assert set(by) == {"h200", "b200"}
    for c in by.values():
        assert c["pods"] == c["sim_pods"] == 2 and c["rows"] > 500 and c["base"] == c["label"]
        assert c["speeds"]["ttft_rows"] > 0 and c["speeds"]["tpot_rows"] > 0
        assert 0.25 <= c["speeds"]["compute"] <= 4 and 0.25 <= c["speeds"]["memory"] <= 4
    faster = by["h200"]["hardware"]["ms_per_token"] / by["b200"]["hardware"]["ms_per_token"]
    assert 2.25 / 1.5 < faster < 2.25 * 1.5  # b200's datasheet compute ratio, within 1.5x
    # token-load-per-class joins the baselines in a mixed pool
    assert list(document["policies"]) == [
        "heuristic",
        "token-load",
        "token-load-per-class",
        "oracle",
    ]
    assert {c["pod_class"] for c in document["fit_error"]["cells"]} == {"h200", "b200"}
    assert "classes   " in stdout and stdout.count("speeds from the rows: compute x") == 2
