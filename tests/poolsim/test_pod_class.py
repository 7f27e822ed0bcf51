"""Mixed hardware in one pool: `--hardware h200:4,b200:4`, each pod's class, the figures per
class, and the predicted policies sending `pod_class` (or not: the -noclass variants) to
real servers."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from poolsim.engine import Engine, RunResult
from poolsim.hardware import B200, H200, HardwareSpecError, parse_hardware, pool_label
from poolsim.metrics import summarize
from poolsim.policies import make_policy
from poolsim.policy_api import PodFeatures, PolicyOptions
from poolsim.workloads import generate
from tests.latency_client.cluster import running_cluster

ROOT = Path(__file__).resolve().parents[2]
MIXED = [H200, H200, B200, B200]


def simulate(*args: str) -> subprocess.CompletedProcess[str]:
    code = f"from latency_cli.main import main; main({['simulate', *args]!r})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


@pytest.mark.parametrize(
    ("spec", "pods", "classes"),
    [
        ("h200", None, ["h200"] * 8),
        ("b200", 3, ["b200"] * 3),
        ("h200:4,b200:4", None, ["h200"] * 4 + ["b200"] * 4),
        ("h200:4,b200:4", 8, ["h200"] * 4 + ["b200"] * 4),
        (" b200:1 , h200:2 ", None, ["b200", "h200", "h200"]),
        ("h200:3", None, ["h200"] * 3),
    ],
)
def test_the_hardware_spec_names_each_pods_class(
    spec: str, pods: int | None, classes: list[str]
) -> None:
    assert [hw.name for hw in parse_hardware(spec, pods)] == classes


@pytest.mark.parametrize(
    ("spec", "pods", "says"),
    [
        ("h200:4,b200:4", 6, "has 8 pods but --pods is 6"),
        ("h200:4,b200", None, "'b200' has no count"),
        ("h200,b200", None, "has no count"),
        ("h200:x", None, "positive integer, not 'x'"),
        ("h200:0,b200:2", None, "positive integer, not '0'"),
        ("h200:-1", None, "positive integer"),
        ("h100:2,b200:2", None, "unknown hardware class 'h100'"),
        ("h100", None, "unknown hardware class 'h100'"),
        ("h200:2,h200:2", None, "h200 is listed twice"),
        ("", None, "empty class"),
        ("h200:2,,b200:2", None, "empty class"),
        ("h200", 0, "--pods must be positive"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(spec: str, pods: int | None, says: str) -> None:
    with pytest.raises(HardwareSpecError) as caught:
        parse_hardware(spec, pods)
    assert says in str(caught.value)


def test_the_command_answers_a_bad_spec_with_a_usage_error() -> None:
    for args in (
        ("--hardware", "h200:4,b200:4", "--pods", "6"),
        ("--hardware", "h200:two"),
        ("--hardware", "tpu:2,b200:2"),
    ):
        done = simulate("--workload", "chat", "--duration", "5", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert done.stderr.startswith("latency-predictor simulate: --"), done.stderr


def test_a_mixed_run_reports_every_class(tmp_path: Path) -> None:
    out = tmp_path / "mixed.json"
    done = simulate(
        "--workload",
        "mixed",
        "--hardware",
        "h200:2,b200:2",
        "--duration",
        "20",
        "--policies",
        "round-robin,least-requests,oracle",
        "--json",
        str(out),
        "--no-progress",
        "--no-regret",
    )
    assert done.returncode == 0, done.stderr
    assert "4 pods (h200:2,b200:2)" in done.stdout
    assert "Per hardware class (h200:2,b200:2):" in done.stdout
    assert "| round-robin | b200 (2) |" in done.stdout
    document = json.loads(out.read_text())
    assert document["pods"] == 4 and document["hardware"] == "h200:2,b200:2"
    assert document["pod_classes"] == ["h200", "h200", "b200", "b200"]
    for figures in document["policies"].values():
        by_class = figures["by_pod_class"]
        assert list(by_class) == ["h200", "b200"]
        assert sum(c["share"] for c in by_class.values()) == pytest.approx(1.0)
        assert sum(c["requests"] for c in by_class.values()) == figures["requests"]
        for entry in by_class.values():
            assert set(entry) == {
                "pods",
                "requests",
                "share",
                "ttft_ms",
                "slo_attainment",
                "served_ttft_coverage",
            }
            assert entry["pods"] == 2 and set(entry["ttft_ms"]) == {"p50", "p90"}
            assert 0.0 <= entry["slo_attainment"] <= 1.0
            assert entry["served_ttft_coverage"] is None  # no predictions
    # round-robin shares alike, and the faster class answers sooner
    rr = document["policies"]["round-robin"]["by_pod_class"]
    assert rr["h200"]["share"] == pytest.approx(0.5, abs=0.01)
    assert rr["b200"]["ttft_ms"]["p50"] < rr["h200"]["ttft_ms"]["p50"]


def test_a_pool_of_one_class_reports_it_alone(tmp_path: Path) -> None:
    out = tmp_path / "one.json"
    done = simulate(
        "--workload",
        "chat",
        "--hardware",
        "b200",
        "--pods",
        "3",
        "--duration",
        "10",
        "--policies",
        "least-requests",
        "--json",
        str(out),
        "--no-progress",
        "--no-regret",
    )
    assert done.returncode == 0, done.stderr
    assert "Per hardware class" not in done.stdout
    document = json.loads(out.read_text())
    assert document["hardware"] == "b200" and document["pod_classes"] == ["b200"] * 3
    (only,) = document["policies"]["least-requests"]["by_pod_class"].items()
    assert only[0] == "b200" and only[1]["share"] == 1.0 and only[1]["pods"] == 3


def test_rows_carry_the_class_only_when_asked() -> None:
    features = PodFeatures(0.1, 10, 0, 1, 1, 0, 0, 0.0, pod_class="b200")
    assert "pod_class" not in features.row()
    assert features.row(True)["pod_class"] == "b200"
    no_class = PodFeatures(0.1, 10, 0, 1, 1, 0, 0, 0.0)
    assert "pod_class" not in no_class.row(True)
    assert features.row() == no_class.row()
    assert pool_label(MIXED) == "h200:2,b200:2" and pool_label([H200] * 3) == "h200"


def stored_classes(db: Path) -> set[str]:
    with sqlite3.connect(db) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT pod_class FROM samples")}


def closed_loop(name: str, folder: Path) -> tuple[RunResult, set[str], list[dict[str, Any]]]:
    """A 40 s run of `name` on a 4-pod mixed pool against real servers in `folder`."""
    folder.mkdir()
    with running_cluster(folder, predictors=1) as cluster:
        options = PolicyOptions(
            seed=1,
            speedup=10.0,
            training_url=cluster.trainer.url,
            prediction_urls=tuple(cluster.prediction_urls),
        )
        policy = make_policy(name, 1, options=options)
        requests = generate("mixed", 4, 40.0, seed=3)
        result = asyncio.run(Engine(requests, 4, MIXED, policy, speedup=10.0, regret=False).run())
        retrains = httpx.get(f"{cluster.trainer.url}/retrains", timeout=10).json()["retrains"]
    return result, stored_classes(folder / "store.db"), retrains


def test_the_predicted_policies_send_the_class_in_a_mixed_pool_and_noclass_does_not(
    tmp_path: Path,
) -> None:
    for name, want in (
        ("predicted-latency", {"h200", "b200"}),
        ("predicted-latency-noclass", {""}),
    ):
        result, classes, retrains = closed_loop(name, tmp_path / name)
        assert not result.unfinished and result.completions
        assert classes == want, name
        scored = {r for entry in retrains for r in (entry["regimes"] or {}).get("ttft", {})}
        assert ("pod_class=b200" in scored) == (name == "predicted-latency"), scored
        by_class = summarize(result)["by_pod_class"]
        assert list(by_class) == ["h200", "b200"]
        assert sum(c["share"] for c in by_class.values()) == pytest.approx(1.0)
        for entry in by_class.values():
            if entry["requests"]:
                coverage = entry["served_ttft_coverage"]
                assert coverage is not None and 0.0 <= coverage <= 1.0
