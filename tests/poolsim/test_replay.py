"""Replay files: good lines become requests; a bad line names its line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from poolsim.replay import ReplayError, load_replay


def write(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "load.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_lines_become_requests_in_file_order(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '{"arrival_s": 0.5, "input_tokens": 300, "output_tokens": 20}',
        "",
        '{"arrival_s": 1, "input_tokens": 900, "output_tokens": 5, "prefix_group": "docs",'
        ' "prefix_tokens": 512, "slo_ttft_ms": 800, "slo_tpot_ms": 50, "note": "ignored"}',
        '{"arrival_s": 2, "input_tokens": 600, "output_tokens": 5, "prefix_group": "faq",'
        ' "prefix_tokens": 256}',
        '{"arrival_s": 3, "input_tokens": 700, "output_tokens": 5, "prefix_group": "docs",'
        ' "prefix_tokens": 512}',
    )
    first, second, third, fourth = load_replay(path)
    assert (first.id, first.arrival_s, first.input_tokens, first.output_tokens) == (0, 0.5, 300, 20)
    assert first.prefix_group is None and first.slo_ttft_ms is None
    assert (second.prefix_tokens, second.slo_ttft_ms, second.slo_tpot_ms) == (512, 800.0, 50.0)
    assert second.prefix_group == fourth.prefix_group != third.prefix_group


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"input_tokens": 3, "output_tokens": 1}', "field 'arrival_s' is required"),
        ('{"arrival_s": -1, "input_tokens": 3, "output_tokens": 1}', "field 'arrival_s' must be"),
        ('{"arrival_s": 0, "input_tokens": 0, "output_tokens": 1}', "field 'input_tokens' must be"),
        ('{"arrival_s": 0, "input_tokens": "9", "output_tokens": 1}', "field 'input_tokens'"),
        ('{"arrival_s": 0, "input_tokens": 9}', "field 'output_tokens' is required"),
        ('{"arrival_s": 0, "input_tokens": 9, "output_tokens": true}', "field 'output_tokens'"),
        ('{"arrival_s": 0, "input_tokens": 9, "output_tokens": 2.5}', "field 'output_tokens'"),
        (
            '{"arrival_s": 0, "input_tokens": 9, "output_tokens": 1, "prefix_tokens": 4}',
            "field 'prefix_tokens' needs a 'prefix_group'",
        ),
        (
            '{"arrival_s": 0, "input_tokens": 9, "output_tokens": 1, "prefix_group": 1, '
            '"prefix_tokens": 10}',
            "field 'prefix_tokens' \\(10\\) exceeds input_tokens",
        ),
        (
            '{"arrival_s": 0, "input_tokens": 9, "output_tokens": 1, "prefix_group": [1]}',
            "field 'prefix_group'",
        ),
        (
            '{"arrival_s": 0, "input_tokens": 9, "output_tokens": 1, "slo_ttft_ms": 0}',
            "field 'slo_ttft_ms' must be a number > 0",
        ),
        (
            '{"arrival_s": 0, "input_tokens": 9, "output_tokens": 1, "slo_tpot_ms": "fast"}',
            "field 'slo_tpot_ms'",
        ),
        ('{"arrival_s": 0, "input_tokens": 9,', "not JSON"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_a_bad_line_is_named_with_its_field(tmp_path: Path, line: str, message: str) -> None:
    good = '{"arrival_s": 0, "input_tokens": 5, "output_tokens": 1}'
    path = write(tmp_path, good, "", line)
    with pytest.raises(ReplayError, match=f"load.jsonl:3: {message}"):
        load_replay(path)


def test_an_empty_file_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ReplayError, match="no requests"):
        load_replay(write(tmp_path, "", "  "))
