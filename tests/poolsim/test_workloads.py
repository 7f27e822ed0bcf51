"""The named workloads: seeded, scaled by pods, shaped as documented."""

from __future__ import annotations

import statistics

import pytest

from poolsim.workloads import MIXED_SIZES, RATE_PER_POD, WORKLOADS, generate


@pytest.mark.parametrize("name", sorted(WORKLOADS))
def test_seeded_and_scaled_by_pods(name: str) -> None:
    assert generate(name, 2, 60.0, 1) == generate(name, 2, 60.0, 1)
    assert generate(name, 2, 60.0, 1) != generate(name, 2, 60.0, 2)
    small, large = len(generate(name, 2, 120.0, 1)), len(generate(name, 8, 120.0, 1))
    assert 3.0 < large / small < 5.0
    reqs = generate(name, 4, 120.0, 3)
    assert all(0 <= r.arrival_s < 120.0 for r in reqs)
    assert [r.id for r in reqs] == list(range(len(reqs)))


def test_rates_match_the_table() -> None:
    for name in ("chat", "prefix", "mixed"):
        count = len(generate(name, 4, 300.0, 0))
        assert count == pytest.approx(RATE_PER_POD[name] * 4 * 300.0, rel=0.15)


def test_ramp_peaks_mid_run_at_five_times_the_base() -> None:
    reqs = generate("ramp", 8, 600.0, 0)
    # expected: 1.2x on average over the first and last 30 s, 4.9x around the middle
    first = sum(r.arrival_s < 30 for r in reqs)
    middle = sum(285 <= r.arrival_s < 315 for r in reqs)
    last = sum(r.arrival_s >= 570 for r in reqs)
    assert 3.4 < middle / first < 4.8 and 3.4 < middle / last < 4.8


def test_prefix_groups_share_their_prefix_length() -> None:
    reqs = generate("prefix", 2, 300.0, 0)
    lengths: dict[int | None, set[int]] = {}
    for r in reqs:
        assert r.prefix_group is not None and 2000 <= r.prefix_tokens < r.input_tokens
        lengths.setdefault(r.prefix_group, set()).add(r.prefix_tokens)
    assert all(len(v) == 1 for v in lengths.values())
    assert len(lengths) > 12  # most of the 24 groups appear


def test_mixed_has_three_sizes_in_their_shares() -> None:
    reqs = generate("mixed", 8, 300.0, 0)
    for share, prompt, output, slo in MIXED_SIZES:
        size = [r for r in reqs if r.output_tokens == output]
        assert len(size) / len(reqs) == pytest.approx(share, abs=0.05)
        assert all(0.75 * prompt - 1 <= r.input_tokens <= 1.25 * prompt + 1 for r in size)
        assert {r.slo_ttft_ms for r in size} == {slo}


def test_chat_lengths_are_sharegpt_like() -> None:
    reqs = generate("chat", 8, 300.0, 0)
    assert statistics.median(r.input_tokens for r in reqs) == pytest.approx(167, rel=0.15)
    assert all(r.prefix_group is None for r in reqs)


def test_unknown_workload_is_named() -> None:
    with pytest.raises(ValueError, match="unknown workload 'bursty'"):
        generate("bursty", 1, 1.0, 0)


def test_a_rate_scale_squeezes_a_longer_run_into_the_duration() -> None:
    # x2: the requests of 20 s arriving within 10 s, the same ones (mix, sizes, order)
    base = generate("mixed", 2, 20.0, seed=3)
    scaled = generate("mixed", 2, 10.0, seed=3, rate_scale=2.0)
    assert len(scaled) == len(base)
    assert [r.input_tokens for r in scaled] == [r.input_tokens for r in base]
    assert [r.arrival_s for r in scaled] == [r.arrival_s / 2.0 for r in base]
    assert all(r.arrival_s < 10.0 for r in scaled)
    assert generate("chat", 2, 10.0, seed=1, rate_scale=1.0) == generate("chat", 2, 10.0, seed=1)
    with pytest.raises(ValueError, match="rate scale"):
        generate("chat", 2, 10.0, seed=1, rate_scale=0.0)
