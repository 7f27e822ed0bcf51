"""`latency-predictor simulate` end to end, as a process."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def simulate(*args: str, prelude: str = "") -> subprocess.CompletedProcess[str]:
    code = f"{prelude}from latency_cli.main import main; main({['simulate', *args]!r})"
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_a_run_writes_the_table_json_and_plots(tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    done = simulate(
        "--workload",
        "mixed",
        "--pods",
        "3",
        "--duration",
        "20",
        "--policies",
        "round-robin,least-requests,oracle",
        "--seed",
        "3",
        "--json",
        str(out),
        "--plots",
        str(tmp_path / "plots"),
    )
    assert done.returncode == 0, done.stderr
    assert "| round-robin |" in done.stdout and "| oracle |" in done.stdout
    assert "100%" in done.stderr  # the progress bar
    document = json.loads(out.read_text())
    assert set(document["policies"]) == {"round-robin", "least-requests", "oracle"}
    assert document["pods"] == 3 and document["seed"] == 3 and document["wall_s"] > 0
    assert "speedup" in document and document["paced_policies"] == []
    figures = document["policies"]["least-requests"]
    for key in ("ttft_ms", "tpot_ms", "e2e_ms"):
        assert set(figures[key]) == {"p50", "p90", "p99"}
        assert 0 < figures[key]["p50"] <= figures[key]["p90"] <= figures[key]["p99"]
    assert 0 <= figures["slo_attainment"] <= 1 and figures["throughput_rps"] > 0
    assert len(figures["pod_share"]) == 3 and abs(sum(figures["pod_share"]) - 1) < 1e-9
    assert len(figures["prefix_hit_rate"]) == 3
    assert "| regret p50 / p90 / mean ms |" in done.stdout
    for name in ("round-robin", "least-requests", "oracle"):
        regret = document["policies"][name]["regret_ms"]
        assert set(regret) == {"p50", "p90", "mean", "per_minute"}
        assert [m["minute"] for m in regret["per_minute"]] == [0]
        (minute,) = regret["per_minute"]
        assert set(minute) == {"minute", "p50", "p90", "mean", "picks"}
        assert minute["picks"] == figures["requests"] and minute["mean"] == regret["mean"]
        (shares,) = document["policies"][name]["pod_share_per_minute"]
        assert len(shares) == 3 and abs(sum(shares) - 1) < 1e-9
    assert document["policies"]["oracle"]["regret_ms"]["p90"] == 0.0
    assert document["policies"]["round-robin"]["regret_ms"]["mean"] > 0.0
    for name in (
        "ttft_cdf.png",
        "pod_share.png",
        "pod_share_over_time.png",
        "regret_per_minute.png",
    ):
        assert (tmp_path / "plots" / name).read_bytes()[:4] == b"\x89PNG"


def test_a_replay_file_runs(tmp_path: Path) -> None:
    path = tmp_path / "load.jsonl"
    path.write_text(
        "".join(
            json.dumps(
                {
                    "arrival_s": i * 0.2,
                    "input_tokens": 300 + i,
                    "output_tokens": 8,
                    "prefix_group": i % 2,
                    "prefix_tokens": 256,
                }
            )
            + "\n"
            for i in range(20)
        )
    )
    out = tmp_path / "sim.json"
    done = simulate(
        "--workload",
        str(path),
        "--pods",
        "2",
        "--policies",
        "heuristic",
        "--json",
        str(out),
        "--no-progress",
        "--no-regret",
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())["policies"]["heuristic"]
    assert figures["completed"] == 20
    assert figures["regret_ms"] == {"p50": None, "p90": None, "mean": None, "per_minute": []}
    assert "| heuristic | " in done.stdout and " | - / - / - | " in done.stdout
    assert max(r for r in figures["prefix_hit_rate"] if r is not None) > 0.5
    assert done.stderr == ""


def test_a_bad_replay_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "load.jsonl"
    path.write_text(
        '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 1}\n'
        '{"arrival_s": 1, "input_tokens": -5, "output_tokens": 1}\n'
    )
    done = simulate("--workload", str(path))
    assert done.returncode == 1
    assert "load.jsonl:2: field 'input_tokens' must be an integer >= 1" in done.stderr


def test_usage_errors_exit_2_and_say_why() -> None:
    done = simulate("--workload", "chat", "--policies", "random,psychic")
    assert done.returncode == 2 and "unknown policy 'psychic'" in done.stderr
    done = simulate("--workload", "nowhere.jsonl")
    assert done.returncode == 2 and "neither a workload" in done.stderr
    done = simulate("--workload", "chat", "--training-url", "http://127.0.0.1:9")
    assert done.returncode == 2 and "--training-url needs --prediction-url" in done.stderr
    done = simulate("--workload", "chat", "--max-model-age", "-1")
    assert done.returncode == 2 and "--max-model-age" in done.stderr


def test_predicted_latency_at_an_unreachable_predictor_falls_back_and_says_so(
    tmp_path: Path,
) -> None:
    from devkit.processes import free_port

    nowhere = f"http://127.0.0.1:{free_port()}"
    out = tmp_path / "sim.json"
    done = simulate(
        "--workload",
        "mixed",
        "--pods",
        "2",
        "--duration",
        "10",
        "--policies",
        "predicted-latency",
        "--prediction-url",
        nowhere,
        "--speedup",
        "50",
        "--json",
        str(out),
        "--no-progress",
    )
    assert done.returncode == 0, done.stderr
    assert f"predictor at {nowhere}, training rows to nowhere" in done.stdout
    assert "paced x50" in done.stdout and "| predicted-latency |" in done.stdout
    document = json.loads(out.read_text())
    assert document["paced_policies"] == ["predicted-latency"]
    figures = document["policies"]["predicted-latency"]
    assert figures["unfinished"] == 0
    assert figures["policy"]["fallbacks"] == figures["completed"]
    assert figures["policy"]["rule_composite"] == figures["completed"]


def test_plots_without_matplotlib_say_how_to_install_it(tmp_path: Path) -> None:
    blocked = "import sys; sys.modules['matplotlib'] = None; "  # as if not installed
    done = simulate("--workload", "chat", "--plots", str(tmp_path), prelude=blocked)
    assert done.returncode == 2
    assert "pip install 'latency-predictor[sim]'" in done.stderr
