"""The calibration's state reconstruction and comparison, on hand-made trace rows."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from poolsim import calibrate, reconstruct
from poolsim.hardware import B200, H200, hardware

OUTPUTS = reconstruct.OutputModel(median=100, sigma=0.5)


def row(
    waiting: int,
    running: int,
    pending: int,
    kv: float,
    prompt: int,
    *,
    ttft: float = 0.0,
    tpot: float = 0.0,
) -> dict[str, float]:
    return {
        "kv_cache_percentage": kv,
        "input_token_length": prompt,
        "num_request_waiting": waiting,
        "num_request_running": running,
        "prefill_tokens_in_flight": pending,
        "decode_tokens_in_flight": 0,
        "prefix_cache_score": 0.0,
        "num_tokens_generated": 0,
        "actual_ttft_ms": ttft,
        "actual_tpot_ms": tpot,
    }


def ttft(r: dict[str, float]) -> float:
    value = reconstruct.simulate_row(r, H200, [500], OUTPUTS, seed=1)
    assert value is not None
    return value


def test_an_idle_pod_serves_a_short_prompt_in_one_step_plus_overhead() -> None:
    value = ttft(row(0, 0, 0, 0.0, 100, ttft=1.0))
    assert value == pytest.approx(H200.overhead_ms + H200.step_floor_ms, rel=0.01)


def test_ttft_grows_with_the_queue_ahead_and_the_prompt() -> None:
    idle = ttft(row(0, 0, 0, 0.0, 2000, ttft=1.0))
    assert idle > ttft(row(0, 0, 0, 0.0, 200, ttft=1.0))
    queued = ttft(row(10, 10, 30_000, 0.0, 2000, ttft=1.0))
    # ten prompts of 3,000 tokens ahead: at least their compute time
    assert queued - idle >= 30_000 * H200.ms_per_token * 0.9


def test_tpot_rows_measure_the_mean_inter_token_time() -> None:
    light = reconstruct.simulate_row(row(0, 2, 0, 0.01, 100, tpot=1.0), H200, [500], OUTPUTS, 2)
    busy = reconstruct.simulate_row(
        row(20, 60, 60_000, 0.5, 100, tpot=1.0), H200, [3000], OUTPUTS, 2
    )
    assert light is not None and busy is not None
    assert light == pytest.approx(H200.step_floor_ms, rel=0.1)  # decode-only steps
    assert busy > 1.5 * light  # prefill chunks of the queue share its steps


def test_compare_reports_medians_per_band(tmp_path: Path) -> None:
    rows = [row(0, 1, 0, 0.0, 100 + i, ttft=60.0 + i) for i in range(12)] + [
        row(0, 1, 0, 0.0, 3000, tpot=20.0)
    ]
    fits = calibrate.compare("sharegpt-h200", rows, H200)
    by_key = {(f.target, f.band): f for f in fits}
    assert by_key[("ttft", "all")].rows == 12
    assert by_key[("ttft", "all")].recorded_median == pytest.approx(65.5)
    assert by_key[("tpot", "2048-8191")].rows == 1
    assert "| sharegpt-h200 | ttft | all | 12 |" in calibrate.table(fits)
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert reconstruct.load_rows("t", tmp_path) == rows


def test_step_time_is_a_roofline() -> None:
    assert H200.step_ms(10, 0, 0.0) == H200.step_floor_ms  # memory-bound: small batch
    big = H200.step_ms(H200.max_batched_tokens, 0, 0.0)
    assert big == pytest.approx(H200.ms_per_token * H200.max_batched_tokens)
    assert H200.step_ms(10, 100_000, 0.0) > H200.step_floor_ms  # KV reads add to memory
    assert B200.step_ms(300, 50_000, 1e6) < H200.step_ms(300, 50_000, 1e6)
    with pytest.raises(ValueError, match="unknown hardware class 'tpu'"):
        hardware("tpu")
