"""The two latency targets. Code loops over `Target` instead of writing TTFT/TPOT twins."""

from __future__ import annotations

from enum import StrEnum


class Target(StrEnum):
    TTFT = "ttft"
    TPOT = "tpot"

    @property
    def actual_field(self) -> str:
        """Training-entry field holding the observed value (0 means "not measured")."""
        return f"actual_{self.value}_ms"

    @property
    def predicted_field(self) -> str:
        """Training-entry field holding the prediction the EPP acted on, if any."""
        return f"predicted_{self.value}_ms"


TARGETS: tuple[Target, ...] = (Target.TTFT, Target.TPOT)
