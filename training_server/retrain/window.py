"""How many of the newest rows per target a retrain fits on (WindowBudget): as many as keep
it within half of the retraining interval on whatever CPU the trainer has.

Fit time grows about linearly with rows, so after a retrain that overran its budget the
window shrinks in proportion (aiming at 80 % of the budget), and after one that used under
a third of it the window grows back by half, up to LATENCY_MAX_TRAINING_WINDOW. The limit
in force is recorded with every retrain (`window_limit`) and exported as a gauge.
"""

from __future__ import annotations

BUDGET_SHARE = 0.5  # of the retraining interval
MIN_WINDOW = 5_000  # below this the model, not the clock, is what suffers


class WindowBudget:
    def __init__(self, configured: int, interval_sec: float):
        self.configured = configured
        self.budget_sec = BUDGET_SHARE * interval_sec
        self.limit = configured

    def observe(self, seconds: float, rows_fitted: int) -> int:
        """Adapt to one retrain that took `seconds` over `rows_fitted` rows (the most of
        either target); returns the limit for the next one."""
        if seconds > self.budget_sec and rows_fitted > MIN_WINDOW:
            scaled = int(min(self.limit, rows_fitted) * 0.8 * self.budget_sec / seconds)
            self.limit = max(MIN_WINDOW, scaled)
        elif seconds < self.budget_sec / 3 and self.limit < self.configured:
            self.limit = min(self.configured, int(self.limit * 1.5))
        return self.limit
