"""RecordingSlot: a real BundleSlot that also keeps every bundle published into it, so a
test sees what a retrainer published, in order."""

from __future__ import annotations

from shared.live_calibration import LiveOffsets
from shared.predictor import LoadedBundle, prior_bundle
from shared.settings import CommonSettings
from shared.slot import BundleSlot


class RecordingSlot(BundleSlot):
    def __init__(self, settings: CommonSettings, serving: LoadedBundle | None = None):
        """The slot a server with `settings` starts with, serving `serving` (not recorded)."""
        super().__init__(
            prior_bundle(settings.model_type, settings.objective_type, settings.quantile_alpha),
            serving,
        )
        self.history: list[LoadedBundle] = []

    def publish(self, bundle: LoadedBundle, live: LiveOffsets | None = None) -> LoadedBundle:
        self.history.append(bundle)
        return super().publish(bundle, live)
