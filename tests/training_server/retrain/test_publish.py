"""A bundle's version always sorts after the one published before it, whichever replica's
clock wrote that one (pools change owner between training replicas)."""

from __future__ import annotations

from datetime import UTC, datetime

from shared.artifact import new_version
from training_server.retrain.publish import version_after


def test_a_version_sorts_after_the_published_one_even_from_a_clock_ahead() -> None:
    now = datetime(2026, 12, 5, 22, 0, 0, tzinfo=UTC)
    mine = new_version(now)
    assert version_after(mine, None) == mine
    assert version_after(mine, new_version(datetime(2026, 12, 5, 21, 0, tzinfo=UTC))) == mine
    ahead = new_version(datetime(2026, 12, 5, 22, 0, 3, 250_000, tzinfo=UTC))
    assert version_after(mine, ahead) == "20261205T220003.250001Z" > ahead
    assert version_after(mine, mine) > mine  # the same instant: still after
    assert version_after(mine, "imported-bundle") == mine  # not ours: nothing to order by
