"""`latency-predictor predict` against a real prediction server on a trained model: the same
answer as `POST /predict` for the same row, from flags, a file or stdin; the server's 422
named per field; usage errors and a server that is down."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devkit.processes import ServerProcess, free_port
from devkit.synthetic import prediction_row
from tests.e2e.test_cli_status import cli, trained_cluster

ROW = prediction_row(
    input_token_length=900,
    num_request_waiting=1,
    num_request_running=12,
    prefix_cache_score=0.25,
    pod_type="prefill",
    prefill_tokens_in_flight=300,
)
REQUIRED = (
    "kv_cache_percentage",
    "input_token_length",
    "num_request_waiting",
    "num_request_running",
    "num_tokens_generated",
    "prefix_cache_score",
)
COMPARED = ("ttft_ms", "tpot_ms", "model_version", "quantile", "model_type", "objective_type")
Cluster = tuple[ServerProcess, ServerProcess, str]  # trainer, predictor, served version


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    with trained_cluster(tmp_path_factory.mktemp("predict")) as servers:
        yield servers


def flags(row: dict[str, Any]) -> list[str]:
    return [
        arg for name, value in row.items() for arg in (f"--{name.replace('_', '-')}", str(value))
    ]


def served(url: str, row: dict[str, Any]) -> dict[str, Any]:
    reply = httpx.post(f"{url}/predict", json=row, timeout=10)
    assert reply.status_code == 200, reply.text
    return {k: reply.json()[k] for k in COMPARED}


def predicted(*args: str, stdin: str | None = None) -> dict[str, Any]:
    done = cli("predict", *args, "--json", stdin=stdin)
    assert done.returncode == 0, done.stdout + done.stderr
    return {k: json.loads(done.stdout)[k] for k in COMPARED}


def test_predict_from_flags_equals_post_predict(cluster: Cluster) -> None:
    _, predictor, version = cluster
    expected = served(predictor.url, ROW)
    assert expected["model_version"] == version
    assert predicted("--url", predictor.url, *flags(ROW)) == expected

    text = cli("predict", "--url", predictor.url, *flags(ROW))
    assert text.returncode == 0, text.stderr
    lines = dict(line.split("  ", 1) for line in text.stdout.splitlines())
    assert float(lines["ttft_ms"]) == round(expected["ttft_ms"], 2)
    assert float(lines["tpot_ms"]) == round(expected["tpot_ms"], 2)
    assert lines["model version"].strip() == version
    assert lines["quantile"].strip().startswith("0.9 ")


def test_optional_fields_default_like_the_schema(cluster: Cluster) -> None:
    _, predictor, _ = cluster
    required_only = {name: ROW[name] for name in REQUIRED}
    assert predicted("--url", predictor.url, *flags(required_only)) == served(
        predictor.url, required_only
    )


def test_predict_from_a_file_and_from_stdin(cluster: Cluster, tmp_path: Path) -> None:
    trainer, predictor, _ = cluster
    expected = served(predictor.url, ROW)
    row_file = tmp_path / "row.json"
    row_file.write_text(json.dumps(ROW))
    assert predicted("--url", predictor.url, "--file", str(row_file)) == expected
    assert predicted("--url", predictor.url, "--file", "-", stdin=json.dumps(ROW)) == expected
    # a flag given with the file overrides its field
    longer = {**ROW, "input_token_length": 5000}
    assert predicted(
        "--url", predictor.url, "--file", str(row_file), "--input-token-length", "5000"
    ) == served(predictor.url, longer)
    # the training server answers /predict from the same published bundle
    assert predicted("--url", trainer.url, "--file", str(row_file)) == expected


def test_a_bad_value_prints_the_field_and_exits_1(cluster: Cluster, tmp_path: Path) -> None:
    _, predictor, _ = cluster
    done = cli("predict", "--url", predictor.url, *flags({**ROW, "kv_cache_percentage": 1.5}))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"latency-predictor predict: the server at {predictor.url} refused the row: "
        "kv_cache_percentage: Input should be less than or equal to 1"
    )
    row_file = tmp_path / "row.json"
    row_file.write_text(json.dumps({**ROW, "input_token_length": -1, "prefix_cache_score": 2}))
    done = cli("predict", "--url", predictor.url, "--file", str(row_file))
    assert done.returncode == 1 and done.stdout == ""
    assert "input_token_length: Input should be greater than or equal to 0" in done.stderr
    assert "prefix_cache_score: Input should be less than or equal to 1" in done.stderr


def test_unreadable_rows_exit_1(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}"  # never reached: the row is read first
    not_json = tmp_path / "row.json"
    not_json.write_text("{kv_cache_percentage: 0.1")
    done = cli("predict", "--url", url, "--file", str(not_json))
    assert done.returncode == 1 and f"{not_json} is not JSON" in done.stderr
    done = cli("predict", "--url", url, "--file", "-", stdin=json.dumps([ROW]))
    assert done.returncode == 1 and "must hold one JSON object" in done.stderr
    done = cli("predict", "--url", url, "--file", str(tmp_path / "missing.json"))
    assert done.returncode == 1 and "No such file or directory" in done.stderr
    assert "Traceback" not in done.stderr


def test_usage_errors_exit_2() -> None:
    done = cli("predict", "--input-token-length", "10")
    assert done.returncode == 2
    assert "missing --kv-cache-percentage, --num-request-waiting" in done.stderr
    done = cli("predict", *flags({**ROW, "input_token_length": "many"}))
    assert done.returncode == 2 and "--input-token-length: invalid int value" in done.stderr


def test_a_server_that_is_down() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    done = cli("predict", "--url", url, *flags(ROW))
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"latency-predictor predict: cannot reach the prediction server at {url}: "
        "connection refused"
    )
