"""The dashboard shows one pool, some, or all: a `pool` variable every query filters on, and
PodMonitors that name the default pool, whose series carry no pool label on /metrics (so
single-pool dashboards and alerts of a plain Prometheus stay as they were)."""

from __future__ import annotations

import re

from tests.k8s.test_grafana_dashboard import exprs, variables
from tests.k8s.test_manifests import of_kind, render

# Every selector of a query names the namespace; each must name the pool too.
SELECTOR = re.compile(r"\{[^{}]*\}")


def test_the_pool_variable_lists_every_pool_and_all_of_them() -> None:
    pool = variables()["pool"]
    assert "pool)" in pool["query"]["query"] and pool["multi"] and pool["includeAll"]
    assert pool["allValue"] == ".*"  # "All" matches the default pool's name as well


def test_every_query_filters_on_the_pool() -> None:
    unfiltered = [
        (where, selector)
        for where, expr in exprs()
        for selector in SELECTOR.findall(expr)
        if 'pool=~"$pool"' not in selector
    ]
    assert unfiltered == []


def test_the_podmonitors_name_the_default_pool() -> None:
    monitors = of_kind(render("monitoring"), "PodMonitor")
    assert set(monitors) == {"latency-training", "latency-prediction"}
    for name, monitor in monitors.items():
        for endpoint in monitor["spec"]["podMetricsEndpoints"]:
            (rule,) = endpoint["metricRelabelings"]
            assert rule == {
                "sourceLabels": ["pool"],
                "regex": "",
                "targetLabel": "pool",
                "replacement": "default",
                "action": "replace",
            }, name
