"""devkit.free_port: servers set up together never get the same port."""

from __future__ import annotations

from devkit.processes import free_port


def test_free_port_never_hands_out_a_port_twice() -> None:
    # Without the record of handed-out ports, 2,000 calls repeated ~130 of them here: a
    # trainer and a prediction server then shared one port (CI saw the prediction server's
    # readiness probe answered by the trainer, and its own bind fail).
    ports = [free_port() for _ in range(2000)]
    assert len(set(ports)) == len(ports)
