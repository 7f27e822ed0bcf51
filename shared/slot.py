"""BundleSlot: the one owner of the bundle a server answers with.

Writers (the retrainer, the live calibration, a bundle import, the prediction server's
watcher) publish under a lock; readers take `serving` without one. A publish is a single
reference assignment, so a request that took the old bundle finishes with it and none sees
TTFT from one bundle and TPOT from another. The live calibration factors are kept here too
and applied to every bundle published, so no writer can publish a bundle without them.
"""

from __future__ import annotations

import threading

from shared.live_calibration import NO_LIVE_OFFSETS, LiveOffsets
from shared.predictor import LoadedBundle, prior_bundle
from shared.settings import CommonSettings


class BundleSlot:
    def __init__(self, prior: LoadedBundle, published: LoadedBundle | None = None):
        """`prior` answers until a trained bundle is published (the documented cold start)."""
        self._serving = published or prior
        self._live = NO_LIVE_OFFSETS
        self._lock = threading.Lock()

    @property
    def serving(self) -> LoadedBundle:
        """What predictions come from now: the published bundle, or the prior."""
        return self._serving

    @property
    def published(self) -> LoadedBundle | None:
        """The trained bundle served, None while the cold-start prior answers."""
        serving = self._serving
        return None if serving.is_prior else serving

    def publish(self, bundle: LoadedBundle, live: LiveOffsets | None = None) -> LoadedBundle:
        """Serve `bundle` with the live factors (`live`, or the ones already set); returns
        the bundle served before."""
        with self._lock:
            if live is not None:
                self._live = live
            previous, self._serving = self._serving, bundle.with_live(self._live)
            return previous

    def set_live(self, live: LiveOffsets) -> LoadedBundle:
        """New live factors for the bundle served and every later one; returns the bundle
        served before."""
        with self._lock:
            self._live = live
            previous, self._serving = self._serving, self._serving.with_live(self._live)
            return previous


def prior_slot(settings: CommonSettings) -> BundleSlot:
    """A slot serving the cold-start prior of `settings` (a server, or a pool, at start)."""
    return BundleSlot(
        prior_bundle(settings.model_type, settings.objective_type, settings.quantile_alpha)
    )
