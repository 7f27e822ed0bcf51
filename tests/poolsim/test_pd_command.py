"""`latency-predictor simulate --roles`: a P/D run's JSON and table, and its usage errors
(in process, for speed; tests/poolsim/test_command.py runs the command as a process)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from poolsim.command import run
from poolsim.command_args import add_arguments


def simulate(*flags: str) -> int:
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    return run(parser.parse_args(["--no-progress", *flags]))


def test_a_pd_run_writes_by_role_and_the_pd_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "pd.json"
    flags = ["--workload", "chat", "--duration", "4", "--roles", "prefill:1,decode:2"]
    assert simulate(*flags, "--policies", "pd-heuristic,round-robin", "--json", str(out)) == 0
    printed = capsys.readouterr().out
    assert "3 pods" in printed and "P/D pool prefill:1,decode:2" in printed
    assert "| pd-heuristic | prefill (1) |" in printed
    document = json.loads(out.read_text())
    assert document["pd"]["roles"] == ["prefill", "decode", "decode"]
    assert document["pd"]["threshold_tokens"] == 16
    assert document["pd"]["kv_bytes_per_token"] == 262_144
    for figures in document["policies"].values():
        roles = figures["by_role"]
        assert set(roles) == {"prefill", "decode"}
        assert roles["prefill"]["tpot_ms"] is None and roles["decode"]["tpot_ms"] > 0
        assert roles["decode"]["share"] == 1.0 and roles["prefill"]["share"] > 0.5
        assert roles["prefill"]["served_tpot_coverage"] is None
        assert set(roles["decode"]) >= {
            "ttft_ms",
            "tpot_ms",
            "slo_attainment",
            "share",
            "served_ttft_coverage",
            "served_tpot_coverage",
        }


def test_a_monolithic_run_has_no_pd_figures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "mono.json"
    flags = ["--workload", "chat", "--duration", "2", "--pods", "2", "--policies", "random"]
    assert simulate(*flags, "--json", str(out)) == 0
    document = json.loads(out.read_text())
    assert "pd" not in document and "by_role" not in document["policies"]["random"]
    assert "P/D" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "says"),
    [
        (["--roles", "prefill:2,decode:6", "--pods", "5"], "--roles 'prefill:2,decode:6' has 8"),
        (["--roles", "prefill:2"], "--roles 'prefill:2': no decode pods"),
        (
            ["--roles", "prefill:2,decode:6", "--hardware", "h200:4,b200:2"],
            "--roles 'prefill:2,decode:6' has 8 pods but --hardware 'h200:4,b200:2' has 6",
        ),
        (["--roles", "prefill:1,decode:1", "--pd-threshold", "-1"], "--pd-threshold"),
        (["--roles", "prefill:1,decode:1", "--join", "h200:1@5"], "--roles: a P/D pool"),
        (["--roles", "prefill:1,decode:1", "--rate-scale", "0"], "--rate-scale"),
    ],
)
def test_pd_usage_errors_exit_2_and_say_why(
    flags: list[str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert simulate("--workload", "chat", "--duration", "2", *flags) == 2
    assert says in capsys.readouterr().err
