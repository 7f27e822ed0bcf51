"""k8s/llm-d/picker-most.values.yaml: the EndpointPickerConfig it hands llm-d's chart is
well formed (every profile entry names a declared plugin, the config file it selects is the
one it defines) and it is the configuration the simulator measured: read back into the
picker's settings, it equals the `predicted-latency:most` variant."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from latency_client import PickerConfig
from poolsim.picker_knobs import parse

VALUES = Path(__file__).resolve().parents[2] / "k8s" / "llm-d" / "picker-most.values.yaml"


def picker_config() -> dict[str, Any]:
    epp = yaml.safe_load(VALUES.read_text(encoding="utf-8"))["router"]["epp"]
    assert set(epp) == {"pluginsConfigFile", "pluginsCustomConfig"}
    files = epp["pluginsCustomConfig"]
    assert list(files) == [epp["pluginsConfigFile"]]
    config: dict[str, Any] = yaml.safe_load(files[epp["pluginsConfigFile"]])
    return config


def test_profile_references_declared_plugins_in_llm_ds_order() -> None:
    config = picker_config()
    assert config["kind"] == "EndpointPickerConfig"
    names = [p.get("name", p["type"]) for p in config["plugins"]]
    assert len(names) == len(set(names))
    (profile,) = config["schedulingProfiles"]
    refs = [entry["pluginRef"] for entry in profile["plugins"]]
    assert refs == names  # every plugin used, once, in pipeline order
    types = {p.get("name", p["type"]): p["type"] for p in config["plugins"]}
    assert [types[r] for r in refs] == [
        "predicted-latency-producer",
        "prefix-cache-affinity-filter",
        "slo-headroom-tier-filter",
        "prefix-cache-affinity-filter",
        "latency-scorer",
        "weighted-random-picker",
    ]


def test_it_is_the_measured_variant() -> None:
    plugins = {
        p.get("name", p["type"]): p.get("parameters", {}) for p in picker_config()["plugins"]
    }
    strict = plugins["strict-prefix-affinity"]["affinityThreshold"]
    loose = plugins["loose-prefix-affinity"]["affinityThreshold"]
    strategy = plugins["latency-scorer"]["headroomSelectionStrategy"]
    measured = parse(f"predicted-latency:{strategy}:tau={strict}+{loose}")
    assert measured.config == parse("predicted-latency:most").config
    assert measured.config != PickerConfig() and measured.use_slos
