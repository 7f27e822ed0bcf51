"""`advise --json OUT` replaces OUT atomically (advisor.report.write_document): the trainer's
GET /advice, reading the same file at any moment, sees the previous answer or the new one
whole, never half a file; nothing is left behind, whether the write succeeds or fails."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from advisor.report import write_document

OLD: dict[str, Any] = {"verdict": "little-gain", "reason": "old", "rows": 1_200}
NEW: dict[str, Any] = {"verdict": "enable", "reason": "new", "rows": 5_000}


def strict(text: str) -> Any:
    """JSON as every other reader parses it: no NaN or Infinity."""

    def refuse(constant: str) -> None:
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_the_target_is_replaced_whole_by_a_rename_in_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "models" / "advice.json"
    write_document(target, OLD)
    real_replace = os.replace
    renames: list[tuple[Path, Path]] = []

    def watched(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        source, destination = Path(source), Path(destination)
        # At the rename the new answer is complete beside the old one, still in place.
        assert source.parent == target.parent and source != target
        assert strict(source.read_text()) == NEW
        assert strict(target.read_text()) == OLD
        renames.append((source, destination))
        real_replace(source, destination)

    monkeypatch.setattr(os, "replace", watched)
    write_document(target, NEW)
    assert len(renames) == 1 and renames[0][1] == target
    assert strict(target.read_text()) == NEW
    assert [p.name for p in target.parent.iterdir()] == ["advice.json"]  # no temporary file


def test_a_failed_write_leaves_the_old_answer_and_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "advice.json"
    write_document(target, OLD)

    def fails(source: str | os.PathLike[str], destination: str | os.PathLike[str]) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fails)
    with pytest.raises(OSError, match="No space left"):
        write_document(target, NEW)
    assert strict(target.read_text()) == OLD
    assert [p.name for p in tmp_path.iterdir()] == ["advice.json"]


def test_a_reader_never_sees_half_a_file(tmp_path: Path) -> None:
    target = tmp_path / "advice.json"
    # Large enough (~300 KB) that a write in place would be seen half done.
    answers = [{**doc, "padding": "x" * 300_000} for doc in (OLD, NEW)]
    write_document(target, answers[0])
    seen: list[str] = []
    done = threading.Event()

    def read() -> None:
        while not done.is_set():
            seen.append(strict(target.read_text())["verdict"])

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(40):
            write_document(target, answers[i % 2])
    finally:
        done.set()
        reader.join()
    assert seen and set(seen) <= {"little-gain", "enable"}  # each read parsed whole
    assert [p.name for p in tmp_path.iterdir()] == ["advice.json"]


def test_strict_json_readable_by_others(tmp_path: Path) -> None:
    target = tmp_path / "advice.json"
    write_document(target, {"verdict": "enable", "minutes": float("nan"), "x": [float("inf")]})
    assert strict(target.read_text()) == {"verdict": "enable", "minutes": None, "x": [None]}
    umask = os.umask(0)
    os.umask(umask)
    # A plain file's mode, not a private temporary's: the trainer may run as another user.
    assert target.stat().st_mode & 0o777 == 0o666 & ~umask
