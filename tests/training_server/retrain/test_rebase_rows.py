"""The held-out rows a rebase compares two bundles on, in the order they are tried."""

from __future__ import annotations

from shared.targets import Target
from training_server.retrain.rebase_rows import (
    REBASE_MIN_ROWS,
    REBASE_ROWS,
    RowsAsked,
    rebase_asks,
)


def test_ttft_asks_first_for_rows_the_old_bundle_was_fitted_around() -> None:
    assert list(rebase_asks(Target.TTFT, level_since=900, old_through=1_000)) == [
        RowsAsked(900, 1_000, REBASE_ROWS),  # its level, up to the old bundle's watermark
        RowsAsked(0, 1_000, REBASE_MIN_ROWS),  # up to the watermark, whatever the level
        RowsAsked(900, None, REBASE_ROWS),  # a young pool: the newest of its level
        RowsAsked(0, None, REBASE_MIN_ROWS),
    ]


def test_tpot_and_an_unknown_watermark_ask_for_the_newest_rows() -> None:
    newest = [RowsAsked(900, None, REBASE_ROWS), RowsAsked(0, None, REBASE_MIN_ROWS)]
    assert list(rebase_asks(Target.TPOT, level_since=900, old_through=1_000)) == newest
    assert list(rebase_asks(Target.TTFT, level_since=900, old_through=0)) == newest
