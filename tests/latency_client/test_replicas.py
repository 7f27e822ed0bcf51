"""ReplicaSet on a clock the test advances: round robin, doubling back-off, probes."""

from __future__ import annotations

import pytest

from latency_client._replicas import Replica, ReplicaSet


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def urls(chosen: list[Replica | None]) -> list[str | None]:
    return [r.url if r else None for r in chosen]


def test_round_robin_over_healthy_replicas() -> None:
    replicas = ReplicaSet(["http://a/", "http://b", "http://c"], clock=Clock())
    assert urls([replicas.choose() for _ in range(4)]) == [
        "http://a",
        "http://b",
        "http://c",
        "http://a",
    ]


def test_a_failed_replica_is_skipped_for_a_doubling_backoff() -> None:
    clock = Clock()
    replicas = ReplicaSet(["http://a", "http://b"], backoff_s=1.0, max_backoff_s=3.0, clock=clock)
    a = replicas.replicas[0]
    replicas.failed(a)  # skipped until 101
    assert urls([replicas.choose() for _ in range(3)]) == ["http://b"] * 3
    clock.now = 101.0
    assert replicas.choose() is a  # back-off over: probed again
    replicas.failed(a)  # second in a row: 2 s, until 103
    clock.now = 102.9
    assert replicas.healthy() == ["http://b"]
    replicas.failed(a)  # third: 4 s capped at 3 s, until 105.9
    assert a.retry_at == pytest.approx(105.9)
    replicas.succeeded(a)
    assert replicas.healthy() == ["http://a", "http://b"] and a.failures_in_a_row == 0


def test_when_all_are_in_backoff_the_one_that_recovers_first_is_probed() -> None:
    clock = Clock()
    replicas = ReplicaSet(["http://a", "http://b"], backoff_s=1.0, clock=clock)
    a, b = replicas.replicas
    replicas.failed(b)  # until 101
    clock.now = 100.5
    replicas.failed(a)  # until 101.5
    assert replicas.choose() is b
    assert replicas.choose(exclude=b) is a  # the failover target, even in back-off
    single = ReplicaSet(["http://only"], clock=clock)
    assert single.choose(exclude=single.replicas[0]) is None


def test_empty_url_list_is_refused() -> None:
    with pytest.raises(ValueError):
        ReplicaSet([])
