"""The Grafana dashboard of k8s/overlays/monitoring: a well-formed Grafana 10/11 dashboard whose
every PromQL query reads only metric names that our servers really export.

The exported names come from the servers' own metric classes (TrainingMetrics,
PredictionMetrics), collected from their registries, with the series names that
prometheus-client adds to each family (`_total`, `_bucket`, `_count`, `_sum`, `_created`)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, Summary

from prediction_server.metrics import PredictionMetrics
from shared.predictor import prior_bundle
from shared.settings import PredictionSettings
from shared.slot import BundleSlot
from training_server.metrics import TrainingMetrics

DASHBOARD = (
    Path(__file__).resolve().parents[2]
    / "k8s"
    / "overlays"
    / "monitoring"
    / "grafana-dashboard.json"
)
PANEL_TYPES = {"timeseries", "stat", "table"}
GRID_WIDTH = 24
# Grafana's own variables, usable in any query.
GRAFANA_BUILTINS = {
    "__rate_interval",
    "__interval",
    "__interval_ms",
    "__range",
    "__range_s",
    "__range_ms",
    "__dashboard",
    "__from",
    "__to",
    "__name",
    "__org",
    "__user",
}

# --- the names our servers export ------------------------------------------------------------

# A throwaway metric of each type shows which series names the installed prometheus-client
# gives a family of that type (a counter "x" is exposed as x_total and x_created, ...).
_CLIENT_TYPES = {
    "counter": Counter,
    "gauge": Gauge,
    "histogram": Histogram,
    "summary": Summary,
    "info": Info,
}


@cache
def client_suffixes(family_type: str) -> frozenset[str]:
    scratch = CollectorRegistry()
    _CLIENT_TYPES[family_type]("x", "probe", registry=scratch)
    return frozenset(
        sample.name.removeprefix("x") for family in scratch.collect() for sample in family.samples
    )


def series_names(registry: CollectorRegistry) -> set[str]:
    """Every series name the registry exposes, labelled families included: those have no
    samples until a label value is first used, so their names come from the family's type."""
    names: set[str] = set()
    for family in registry.collect():
        names |= {sample.name for sample in family.samples}
        names |= {family.name + suffix for suffix in client_suffixes(family.type)}
    return names


def server_registries() -> tuple[CollectorRegistry, CollectorRegistry]:
    """The registries the training and prediction servers build at start-up (app.py)."""
    settings = PredictionSettings()
    slot = BundleSlot(
        prior_bundle(settings.model_type, settings.objective_type, settings.quantile_alpha)
    )
    return TrainingMetrics().registry, PredictionMetrics(slot).registry


@cache
def exported_metrics() -> frozenset[str]:
    return frozenset(set().union(*map(series_names, server_registries())))


# --- metric names in PromQL ------------------------------------------------------------------

# Removed, in this order, before looking for names: string literals (label values, regexes,
# label_replace arguments); Grafana variables ($x, ${x}, ${x:fmt}, [[x]]); label matchers
# {...}; ranges and subqueries [...]; the label lists of by/without/on/ignoring/group_*.
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_GRAFANA_VARIABLE = re.compile(r"\$\{[^}]*\}|\$\w+|\[\[[^\]]*\]\]")
_MATCHERS = re.compile(r"\{[^{}]*\}")
_RANGE = re.compile(r"\[[^\[\]]*\]")
_LABEL_LIST = re.compile(
    r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)", re.IGNORECASE
)
# A whole identifier (not the tail of a number such as 1e3 or 0x1f, nor a part of a longer
# name) that is not a function call: not followed by "(".
_IDENTIFIER = re.compile(r"(?<![\w.:])[A-Za-z_:][\w:]*(?![\w:]|\s*\()")
_KEYWORDS = {
    "and",
    "or",
    "unless",
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
    "offset",
    "bool",
    "inf",
    "nan",
    "atan2",
}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression reads."""
    text = _STRING.sub('""', expr)
    text = _GRAFANA_VARIABLE.sub(" ", text)
    text = _MATCHERS.sub(" ", text)
    text = _RANGE.sub(" ", text)
    text = _LABEL_LIST.sub(" ", text)
    return {m for m in _IDENTIFIER.findall(text) if m.lower() not in _KEYWORDS}


def expr_errors(expr: str, exported: frozenset[str]) -> list[str]:
    names = metric_names(expr)
    if not names:
        return [f"names no metric: {expr}"]
    return [f"{name} is not exported by our servers: {expr}" for name in sorted(names - exported)]


# --- the dashboard ---------------------------------------------------------------------------


@cache
def dashboard() -> dict[str, Any]:
    board: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return board


def panels() -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = dashboard()["panels"]
    return listed


def variables() -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in dashboard()["templating"]["list"]}


def exprs() -> Iterator[tuple[str, str]]:
    for panel in panels():
        for target in panel["targets"]:
            yield f"panel {panel['id']} {panel['title']!r} {target['refId']}", target["expr"]


def variable_query(variable: dict[str, Any]) -> str:
    query = variable["query"]  # the string itself, or an object holding it under "query"
    text: str = query["query"] if isinstance(query, dict) else query
    return text


_LABEL_VALUES = re.compile(r"label_values\((?P<selector>.+),\s*(?P<label>\w+)\)", re.DOTALL)


def test_the_extraction_finds_metric_names_and_nothing_else() -> None:
    cases = {
        "histogram_quantile(0.99, sum by (le, route) (rate(latency_predict_duration_seconds_bucket"
        '{job=~"$job", route!="bulk"}[$__rate_interval])))': {
            "latency_predict_duration_seconds_bucket"
        },
        "sum without (instance) (increase(a_total[5m] offset 1h)) / ignoring (x) b": {
            "a_total",
            "b",
        },
        'max by (target) (m{metric="mae"} and on (job, instance) (leader{job=~"${job:regex}"} '
        "== 1))": {"m", "leader"},
        "time() - max(published_seconds > 0) * 1e3 + 0x1f - Inf": {"published_seconds"},
        'label_replace(up, "dst", "$1", "src", "(.*)") + rate(c[1m:10s])': {"up", "c"},
        "sum(x) by (route) + avg(y) without (pod) > bool 0.5": {"x", "y"},
        "a_count unless on (pod) group_left (version) b_info or c": {"a_count", "b_info", "c"},
        "rate(ns:recorded_rule:rate5m[[[interval]]])": {"ns:recorded_rule:rate5m"},
        "vector(0.9)": set(),
        "$metric": set(),
    }
    for expr, names in cases.items():
        assert metric_names(expr) == names, expr


def test_the_check_rejects_a_made_up_metric() -> None:
    exported = exported_metrics()
    good = 'sum(rate(latency_predicted_rows_total{route="strict"}[5m]))'
    assert expr_errors(good, exported) == []
    (error,) = expr_errors(
        "sum(rate(latency_predicted_rows_total[5m])) / sum(rate(latency_made_up_total[5m]))",
        exported,
    )
    assert "latency_made_up_total" in error
    # The family name of a counter is not a series: Prometheus only has the _total one.
    assert expr_errors("rate(latency_predicted_rows[5m])", exported)
    assert expr_errors("vector(0.9)", exported) == ["names no metric: vector(0.9)"]


def test_exported_names_come_from_the_real_registries() -> None:
    exported = exported_metrics()
    # Both servers, labelled and unlabelled families, with prometheus-client's suffixes.
    assert {
        "latency_predict_duration_seconds_bucket",
        "latency_predict_duration_seconds_count",
        "latency_predicted_rows_total",
        "latency_predict_errors_total",
        "latency_model_age_seconds",
        "latency_model_loaded_info",
        "latency_model_reloads_total",
        "latency_samples_accepted_total",
        "latency_retrains_total",
        "latency_retrain_metric",
        "latency_retrain_duration_seconds_sum",
    } <= exported
    # The suffix rule agrees with what the client really exposes for unlabelled families.
    for registry in server_registries():
        for family in registry.collect():
            derived = {family.name + suffix for suffix in client_suffixes(family.type)}
            assert {sample.name for sample in family.samples} <= derived, family.name


def test_the_dashboard_is_a_grafana_dashboard() -> None:
    d = dashboard()
    assert d["title"] and re.fullmatch(r"[A-Za-z0-9_-]{1,40}", d["uid"]), d.get("uid")
    assert isinstance(d["schemaVersion"], int) and d["schemaVersion"] >= 36
    assert "id" not in d or d["id"] is None, "a provisioned dashboard must not carry a db id"
    source = variables()["datasource"]
    assert (source["type"], source["query"]) == ("datasource", "prometheus")


def test_every_panel_has_a_unique_id_a_place_and_targets() -> None:
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids)), ids
    cells: dict[tuple[int, int], int] = {}
    for panel in panels():
        assert panel["type"] in PANEL_TYPES, (panel["id"], panel["type"])
        assert panel["title"], panel["id"]
        pos = panel["gridPos"]
        assert all(isinstance(pos[k], int) for k in ("h", "w", "x", "y")), panel["id"]
        assert pos["w"] > 0 and pos["h"] > 0 and pos["x"] + pos["w"] <= GRID_WIDTH, panel["id"]
        for x in range(pos["x"], pos["x"] + pos["w"]):
            for y in range(pos["y"], pos["y"] + pos["h"]):
                assert (x, y) not in cells, f"panels {cells.get((x, y))} and {panel['id']} overlap"
                cells[(x, y)] = panel["id"]
        assert panel["targets"], panel["id"]
        refs = [t["refId"] for t in panel["targets"]]
        assert len(refs) == len(set(refs)), (panel["id"], refs)
        for target in [panel, *panel["targets"]]:
            assert target["datasource"] == {"type": "prometheus", "uid": "${datasource}"}


def test_every_query_reads_only_exported_metrics() -> None:
    exported = exported_metrics()
    errors = [f"{where}: {e}" for where, expr in exprs() for e in expr_errors(expr, exported)]
    for name, variable in variables().items():
        if variable["type"] != "query":
            continue
        match = _LABEL_VALUES.fullmatch(variable_query(variable))
        assert match, (name, variable_query(variable))
        errors += [f"variable {name}: {e}" for e in expr_errors(match["selector"], exported)]
    assert not errors, "\n".join(errors)


def test_every_grafana_variable_used_is_defined() -> None:
    defined = set(variables()) | GRAFANA_BUILTINS
    queries = [expr for _, expr in exprs()]
    queries += [variable_query(v) for v in variables().values() if v["type"] == "query"]
    for query in queries:
        for name in re.findall(r"\$\{?(\w+)", query):
            assert name in defined, (name, query)


HOT_PATH_BUCKETS = "latency_predict_duration_seconds_bucket"


@pytest.mark.parametrize(
    "needed",
    [
        # hot path: p50 and p99 per route from the histogram's buckets
        *(
            rf"histogram_quantile\({q}, sum by \(le, route\) \(rate\({HOT_PATH_BUCKETS}\{{"
            for q in (r"0\.5", r"0\.99")
        ),
        r"rate\(latency_predicted_rows_total\{",
        r"sum by \(route, reason\) \(rate\(latency_predict_errors_total\{",
        r"latency_model_loaded_info\{",
        r"latency_model_age_seconds\{",
        r"latency_model_reloads_total\{",
        r"latency_model_refused_total\{",
        *(
            rf'latency_retrain_metric\{{[^}}]*metric="{m}"'
            for m in ("mae", "rmse", "pinball_loss", "coverage")
        ),
        r"latency_live_coverage\{",
        r"latency_retrain_duration_seconds_bucket\{",
        r"latency_retrains_total\{",
        r"latency_retrain_consecutive_failures\{",
        r"rate\(latency_samples_accepted_total\{",
        r"rate\(latency_samples_rejected_total\{",
        r"latency_store_samples\{",
    ],
)
def test_the_dashboard_shows(needed: str) -> None:
    assert any(re.search(needed, expr) for _, expr in exprs()), needed


def test_the_coverage_panel_marks_the_p90_target() -> None:
    (panel,) = [p for p in panels() if any('metric="coverage"' in t["expr"] for t in p["targets"])]
    defaults = panel["fieldConfig"]["defaults"]
    assert defaults["custom"]["thresholdsStyle"]["mode"] in {"line", "dashed", "line+area"}
    assert 0.9 in [step["value"] for step in defaults["thresholds"]["steps"]]
    assert defaults["unit"] == "percentunit"


def test_the_description_says_prediction_metrics_are_per_process() -> None:
    # No prometheus-client multiprocess mode: with several uvicorn workers a scrape reads one.
    assert "per process" in dashboard()["description"]
