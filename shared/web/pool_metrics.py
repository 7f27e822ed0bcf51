"""Every pool's series on one /metrics, each sample labelled with its pool.

Each pool keeps its own prometheus-client registry (the same metric objects as a
single-pool server, so its code and its tests read them unlabelled). PoolSeries, registered
in the process registry, merges them at scrape time: one family per metric name, each
sample of a named pool with `pool="<name>"` added. The default pool's samples keep the
labels they have always had, so the series, dashboards and alerts of a single-pool
deployment are unchanged (PromQL selects the default pool as `pool=""`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from shared.pools import DEFAULT_POOL

POOL_LABEL = "pool"


class PoolSeries(Collector):
    def __init__(self, registries: Callable[[], Mapping[str, CollectorRegistry]]):
        """`registries`: each pool's registry by pool name, read at every scrape."""
        self.registries = registries

    def collect(self) -> Iterator[Metric]:
        families: dict[str, Metric] = {}
        for pool, registry in self.registries().items():
            for family in registry.collect():
                merged = families.get(family.name)
                if merged is None:
                    merged = families[family.name] = Metric(
                        family.name, family.documentation, family.type, family.unit
                    )
                if pool == DEFAULT_POOL:  # as a single-pool server has always shown it
                    merged.samples.extend(family.samples)
                    continue
                for sample in family.samples:
                    labels = {**sample.labels, POOL_LABEL: pool}
                    merged.samples.append(sample._replace(labels=labels))
        yield from families.values()

    def describe(self) -> Iterator[Metric]:
        return iter(())  # unknown until scraped: pools come and go
