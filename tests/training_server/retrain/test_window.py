"""The training window shrinks when a retrain overruns half the interval, grows back when
it is cheap, and never leaves [MIN_WINDOW, configured]."""

from __future__ import annotations

from training_server.retrain.window import MIN_WINDOW, WindowBudget


def test_overrun_shrinks_in_proportion() -> None:
    budget = WindowBudget(100_000, interval_sec=10.0)  # budget 5 s
    # 100k rows took 10 s: aim at 80 % of 5 s -> 100k * 0.8 * 5 / 10 = 40k
    assert budget.observe(10.0, 100_000) == 40_000
    # a window not yet full shrinks from the rows it had: 20k rows took 8 s -> 10k
    assert WindowBudget(100_000, 10.0).observe(8.0, 20_000) == 10_000


def test_bounds_and_growth() -> None:
    budget = WindowBudget(100_000, interval_sec=10.0)
    assert budget.observe(200.0, 100_000) == MIN_WINDOW  # never below the floor
    assert budget.observe(3.0, MIN_WINDOW) == MIN_WINDOW  # within budget: kept
    assert budget.observe(1.0, MIN_WINDOW) == 7_500  # under a third: grows by half
    for _ in range(20):
        budget.observe(0.1, budget.limit)
    assert budget.limit == 100_000  # back to the configured window, not beyond
    assert WindowBudget(100_000, 10.0).observe(30.0, 4_000) == 100_000  # tiny: no shrink
