"""GET /advice: the advice file `latency-predictor advise --json` wrote, served as written
with `written_at`; 404 naming the file and the command without one, 503 (never a 500) for a
file that is no advice; locked with the dashboard. A real app on a real SQLite store."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from advisor.report import write_document
from shared.settings import LLM_D_HOME, TrainingSettings
from tests.training_server.conftest import OpenClient
from training_server.routes.advice import ADVICE_MAX_BYTES

TOKEN = "s3cret-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
# As advisor.report.document writes it, cut down: what the dashboard shows.
ADVICE: dict[str, Any] = {
    "verdict": "little-gain",
    "reason": "pods rarely queue (a request waiting in 1% of rows)",
    "confidence": "high",
    "confidence_reasons": [],
    "missing": [],
    "store": "sqlite:///chat.db",
    "window_hours": 6.0,
    "rows": 42186,
    "minutes": 11.0,
    "fit_error": None,
    "policies": {
        "token-load": {"ttft_ms": {"p50": 71.9, "p90": 156.0}, "slo_attainment": 0.974},
        "latency-first": {"ttft_ms": {"p50": 71.2, "p90": 155.0}, "slo_attainment": 0.974},
    },
    "cost": {"prediction_workers": 1, "total_cpu_cores": 0.22},
}


def advice_file(name: str, tmp_path: Path) -> Path:
    """The default advice file of open_client(name=name): advice.json in its model directory."""
    return tmp_path / name / "models" / "advice.json"


def put(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def refused(client: TestClient, path: Path) -> str:
    """The 503's detail, after checking it is one."""
    response = client.get("/advice")
    assert response.status_code == 503, response.text
    assert response.headers["content-type"] == "application/json"
    detail: str = response.json()["detail"]
    assert detail.startswith("advice file unreadable: ")
    assert str(path) in detail
    return detail


def test_without_a_file_404_names_the_file_and_the_command(
    client: TestClient, tmp_path: Path
) -> None:
    response = client.get("/advice")
    assert response.status_code == 404
    body = response.json()
    path = advice_file("a", tmp_path)
    command = f"latency-predictor advise --db URL --pods N --json {path}"
    assert body["detail"] == f"no advice file at {path}: `{command}` writes it"
    assert body["path"] == str(path) and body["command"] == command


def test_the_file_advise_writes_is_served_as_written_with_its_time(
    client: TestClient, tmp_path: Path
) -> None:
    path = advice_file("a", tmp_path)
    write_document(path, ADVICE)
    os.utime(path, (1_780_000_000.25, 1_780_000_000.25))
    response = client.get("/advice")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert {k: v for k, v in body.items() if k != "written_at"} == ADVICE
    assert body["written_at"] == "2026-05-28T20:26:40.250000Z"
    assert datetime.fromisoformat(body["written_at"]) == datetime.fromtimestamp(
        1_780_000_000.25, UTC
    )


def test_each_request_reads_the_file_again(client: TestClient, tmp_path: Path) -> None:
    path = advice_file("a", tmp_path)
    write_document(path, ADVICE)
    assert client.get("/advice").json()["verdict"] == "little-gain"
    write_document(path, {**ADVICE, "verdict": "enable"})
    assert client.get("/advice").json()["verdict"] == "enable"
    path.unlink()
    assert client.get("/advice").status_code == 404


def test_latency_advice_file_moves_it(open_client: OpenClient, tmp_path: Path) -> None:
    elsewhere = tmp_path / "shared" / "pool-a.json"
    client = open_client(advice_file=elsewhere)
    assert client.get("/advice").json()["path"] == str(elsewhere)
    write_document(advice_file("a", tmp_path), {**ADVICE, "verdict": "enable"})  # not read
    write_document(elsewhere, ADVICE)
    assert client.get("/advice").json()["verdict"] == "little-gain"


def test_the_default_follows_the_model_directory_as_derived() -> None:
    assert TrainingSettings(model_dir=Path("/m")).advice_path() == Path("/m/advice.json")
    llm_d = TrainingSettings(ttft_model_path=Path("/models/ttft.joblib"))
    assert llm_d.advice_path() == Path("/models") / LLM_D_HOME / "models" / "advice.json"
    chosen = TrainingSettings(model_dir=Path("/m"), advice_file=Path("/a/b.json"))
    assert chosen.advice_path() == Path("/a/b.json")
    # A plain path is the default pool's alone; a named pool keeps its own default.
    assert chosen.advice_path("h200") == Path("/m/advice.json")
    template = TrainingSettings(model_dir=Path("/m"), advice_file=Path("/a/{pool}.json"))
    assert template.advice_path("h200") == Path("/a/h200.json")
    assert template.advice_path() == Path("/a/default.json")


@pytest.mark.parametrize("bad", ["/a/{other}.json", "/a/{pool.json", "/a/pool}.json"])
def test_a_template_with_another_placeholder_is_refused(bad: str) -> None:
    with pytest.raises(ValidationError, match=r"LATENCY_ADVICE_FILE.*only placeholder"):
        TrainingSettings(model_dir=Path("/m"), advice_file=Path(bad))


def test_each_pool_serves_its_own_advice_file(open_client: OpenClient, tmp_path: Path) -> None:
    folder = tmp_path / "advice"
    client = open_client(advice_file=folder / "{pool}.json")
    write_document(folder / "default.json", ADVICE)
    write_document(folder / "h200-llama.json", {**ADVICE, "verdict": "enable"})
    assert client.get("/advice").json()["verdict"] == "little-gain"
    assert client.get("/pools/h200-llama/advice").json()["verdict"] == "enable"
    missing = client.get("/pools/b200-llama/advice").json()
    assert missing["path"] == str(folder / "b200-llama.json")
    assert "--pool b200-llama --json" in missing["command"]


def test_a_plain_advice_file_is_never_shown_for_another_pool(
    open_client: OpenClient, tmp_path: Path
) -> None:
    plain = tmp_path / "advice.json"
    client = open_client(advice_file=plain)
    write_document(plain, ADVICE)
    assert client.get("/advice").status_code == 200
    assert client.get("/pools/h200-llama/advice").status_code == 404


def test_a_directory_holds_each_pools_file(open_client: OpenClient, tmp_path: Path) -> None:
    folder = tmp_path / "advice"
    folder.mkdir()
    client = open_client(advice_file=folder)
    write_document(folder / "default.json", ADVICE)
    write_document(folder / "h200-llama.json", {**ADVICE, "verdict": "enable"})
    assert client.get("/advice").json()["verdict"] == "little-gain"
    assert client.get("/pools/h200-llama/advice").json()["verdict"] == "enable"
    assert client.get("/pools/b200-llama/advice").json()["path"] == str(folder / "b200-llama.json")


def test_a_trailing_slash_names_a_directory_made_later(
    open_client: OpenClient, tmp_path: Path
) -> None:
    folder = tmp_path / "later"
    client = open_client(advice_file=f"{folder}/")
    assert client.get("/pools/h200-llama/advice").json()["path"] == str(folder / "h200-llama.json")
    write_document(folder / "h200-llama.json", ADVICE)  # advise makes the folder
    assert client.get("/pools/h200-llama/advice").json()["verdict"] == "little-gain"
    assert client.get("/advice").status_code == 404  # default.json: not written yet


def test_an_existing_directory_is_said_at_start_up(tmp_path: Path) -> None:
    settings = TrainingSettings(model_dir=Path("/m"), advice_file=tmp_path)
    assert settings.advice_path("h200") == tmp_path / "h200.json"
    assert settings.startup_lines() == [
        f"LATENCY_ADVICE_FILE={tmp_path}/{{pool}}.json "
        f"(derived from LATENCY_ADVICE_FILE={tmp_path}, a directory)"
    ]
    # Empty is unset; a file path that is no directory keeps its meaning.
    unset = TrainingSettings.model_validate({"model_dir": "/m", "advice_file": ""})
    assert unset.advice_path() == Path("/m/advice.json")
    plain = TrainingSettings(model_dir=Path("/m"), advice_file=tmp_path / "a.json")
    assert plain.derived == () and plain.advice_path() == tmp_path / "a.json"


def test_a_bad_template_stops_the_trainer_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from training_server.__main__ import main

    monkeypatch.setenv("LATENCY_ADVICE_FILE", "/advice/{name}.json")
    with pytest.raises(SystemExit) as stopped:
        main([])
    message = str(stopped.value)
    assert message.startswith("invalid settings: ")
    assert "LATENCY_ADVICE_FILE='/advice/{name}.json': the only placeholder is {pool}" in message


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b'{"verdict": "enable", "reason": "cut', "not valid JSON (Unterminated string"),
        (b"", "not valid JSON (Expecting value"),
        (b"[1, 2]", "not a JSON object but an array"),
        (b'"enable"', "not a JSON object but a string"),
        (b"null", "not a JSON object but null"),
        (b"42", "not a JSON object but a number"),
        (b'{"verdict": "\xff"}', "not UTF-8 text"),
        (b"[" * 100_000 + b"]" * 100_000, "not valid JSON (nested too deeply)"),
        (b'{"a": ' + b"[" * 900 + b"]" * 900 + b"}", "nested too deeply to serve"),
    ],
)
def test_a_file_that_is_no_advice_answers_503_saying_why(
    client: TestClient, tmp_path: Path, data: bytes, reason: str
) -> None:
    path = advice_file("a", tmp_path)
    put(path, data)
    assert refused(client, path).startswith(f"advice file unreadable: {reason}")


def test_a_file_over_1_mb_answers_503_and_one_just_under_is_served(
    client: TestClient, tmp_path: Path
) -> None:
    path = advice_file("a", tmp_path)
    head = json.dumps({**ADVICE, "padding": ""}).encode()[:-2]  # ...,"padding": "
    put(path, head + b"x" * (ADVICE_MAX_BYTES - len(head) - 2) + b'"}')
    assert path.stat().st_size == ADVICE_MAX_BYTES
    assert client.get("/advice").json()["verdict"] == "little-gain"
    put(path, head + b"x" * (ADVICE_MAX_BYTES - len(head) - 1) + b'"}')
    assert "larger than 1,048,576 bytes" in refused(client, path)


def test_a_directory_at_the_path_answers_503(client: TestClient, tmp_path: Path) -> None:
    path = advice_file("a", tmp_path)
    path.mkdir(parents=True)
    assert "Is a directory" in refused(client, path)


def test_a_file_it_may_not_read_answers_503(client: TestClient, tmp_path: Path) -> None:
    path = advice_file("a", tmp_path)
    put(path, json.dumps(ADVICE).encode())
    path.chmod(0)
    try:
        if os.access(path, os.R_OK):  # root reads it anyway
            pytest.skip("running as root: permissions do not stop a read")
        assert "Permission denied" in refused(client, path)
    finally:
        path.chmod(0o644)


def test_non_finite_numbers_an_older_writer_left_are_null(
    client: TestClient, tmp_path: Path
) -> None:
    path = advice_file("a", tmp_path)
    big = 123456789012345678901234567890  # beyond 64 bits
    put(path, b'{"verdict": "enable", "minutes": NaN, "rows": Infinity, "big": %d}' % big)
    body = client.get("/advice").json()
    assert body["minutes"] is None and body["rows"] is None
    assert body["big"] == big


def test_open_without_protect_dashboard_even_with_a_token(
    open_client: OpenClient, tmp_path: Path
) -> None:
    client = open_client(api_token=TOKEN, protect_epp_routes=True)  # as /retrains: not EPP's
    assert client.get("/advice").status_code == 404
    write_document(advice_file("a", tmp_path), ADVICE)
    assert client.get("/advice").status_code == 200


def test_locked_with_the_dashboard(open_client: OpenClient, tmp_path: Path) -> None:
    locked = open_client(api_token=TOKEN, protect_dashboard=True)
    write_document(advice_file("a", tmp_path), ADVICE)
    for route in ("/advice", "/retrains", "/dashboard"):
        response = locked.get(route)
        assert response.status_code == 401, route
        assert response.headers["www-authenticate"] == "Bearer"
        assert locked.get(route, headers={"Authorization": "Bearer wrong"}).status_code == 401
        assert locked.get(route, headers=BEARER).status_code == 200, route
    assert locked.get("/advice", headers={"X-API-Token": TOKEN}).json()["verdict"] == (
        "little-gain"
    )


def test_the_dashboard_has_the_panel_and_reads_advice(client: TestClient) -> None:
    page = client.get("/dashboard").text
    assert '<section id="advice"' in page
    assert 'fetchJson("/advice")' in page
    assert (
        "ADVICE_REFRESH_MS = 60000" in page
        and "setTimeout(refreshAdvice, ADVICE_REFRESH_MS)" in page
    )
    assert "No advice yet: run <code>latency-predictor advise" in page
    for verdict in ("enable", "little-gain", "not-enough-data"):
        assert f'"{verdict}"' in page
    assert ".verdict.enable" in page and ".verdict.not-enough-data" in page
