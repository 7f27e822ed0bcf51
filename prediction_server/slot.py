"""ModelSlot: holds the one bundle being served. A swap is a single reference assignment,
so a request that took the old bundle finishes with it and no request sees a mix."""

from __future__ import annotations

from shared.predictor import LoadedBundle


class ModelSlot:
    def __init__(self, initial: LoadedBundle):
        self._bundle = initial

    @property
    def bundle(self) -> LoadedBundle:
        return self._bundle

    def swap(self, bundle: LoadedBundle) -> LoadedBundle:
        previous, self._bundle = self._bundle, bundle
        return previous
