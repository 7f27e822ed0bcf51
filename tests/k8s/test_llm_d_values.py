"""k8s/llm-d/values.yaml, the values an operator passes to llm-d's router chart with -f: every
key it sets must be one the chart's values have (a misspelt key is silently ignored by Helm),
and what it sets must make our servers what the file says."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
import yaml

from shared.settings import (
    LLM_D_HOME,
    CommonSettings,
    PredictionSettings,
    TrainingSettings,
    env_names,
)

VALUES = Path(__file__).resolve().parents[2] / "k8s" / "llm-d" / "values.yaml"
ROOT = "router.latencyPredictor"
SERVERS = ("trainingServer", "predictionServers")

# The chart's values under router.latencyPredictor, as docs/llm-d-chart.md lists
# them (it summarises llm-d-router's config/charts/routerlib/values.yaml and
# templates/_latency-predictor.tpl; `resources` is that file's name for the requests and
# limits the spec quotes). A key ending in ".*" is a map whose keys are free: the ConfigMap
# of environment variables.
CHART_KEYS = {
    f"{ROOT}.enabled",
    f"{ROOT}.trainingServer.port",
    f"{ROOT}.trainingServer.volumeSize",
    f"{ROOT}.predictionServers.count",
    f"{ROOT}.predictionServers.startPort",
    *(
        f"{ROOT}.{server}.{key}"
        for server in SERVERS
        for key in (
            "image.registry",
            "image.repository",
            "image.tag",
            "command",
            "args",
            "resources.requests.cpu",
            "resources.requests.memory",
            "resources.limits.cpu",
            "resources.limits.memory",
            "config.*",
        )
    ),
}
# The chart's default ConfigMaps (same source): its names a config may override.
CHART_CONFIG = {
    "trainingServer": {
        "LATENCY_RETRAINING_INTERVAL_SEC": "10",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "100",
        "LATENCY_TTFT_MODEL_PATH": "/models/ttft.joblib",
        "LATENCY_TPOT_MODEL_PATH": "/models/tpot.joblib",
        "LATENCY_TTFT_SCALER_PATH": "/models/ttft_scaler.joblib",
        "LATENCY_TPOT_SCALER_PATH": "/models/tpot_scaler.joblib",
        "LATENCY_MODEL_TYPE": "xgboost",
        "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": "500",
        "LATENCY_OBJECTIVE_TYPE": "mean",
    },
    "predictionServers": {
        "LATENCY_MODEL_TYPE": "xgboost",
        "PREDICT_HOST": "0.0.0.0",
        "LOCAL_TTFT_MODEL_PATH": "/server_models/ttft.joblib",
        "LOCAL_TPOT_MODEL_PATH": "/server_models/tpot.joblib",
        "LOCAL_TTFT_SCALER_PATH": "/server_models/ttft_scaler.joblib",
        "LOCAL_TPOT_SCALER_PATH": "/server_models/tpot_scaler.joblib",
        "UVICORN_WORKERS": "28",
        "OMP_NUM_THREADS": "1",
        "MODEL_SYNC_INTERVAL_SEC": "30",
        "LATENCY_OBJECTIVE_TYPE": "mean",
    },
}
SETTINGS: dict[str, type[CommonSettings]] = {
    "trainingServer": TrainingSettings,
    "predictionServers": PredictionSettings,
}


def values() -> dict[str, Any]:
    loaded = yaml.safe_load(VALUES.read_text())
    assert isinstance(loaded, dict)
    return loaded


def leaves(tree: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted paths of every value set (a config map's keys are "config.<NAME>")."""
    paths = []
    for key, value in tree.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and value:
            paths.extend(leaves(value, f"{path}."))
        else:
            paths.append(path)
    return paths


def unknown_keys(tree: dict[str, Any]) -> list[str]:
    free = {k.removesuffix("*") for k in CHART_KEYS if k.endswith(".*")}
    return [
        path
        for path in leaves(tree)
        if path not in CHART_KEYS and not any(path.startswith(f) for f in free)
    ]


def server(tree: dict[str, Any], name: str) -> dict[str, Any]:
    part: dict[str, Any] = tree["router"]["latencyPredictor"][name]
    return part


def test_every_key_set_is_one_the_chart_has() -> None:
    assert unknown_keys(values()) == []


@pytest.mark.parametrize(
    "path",
    [
        ("router", "latencyPredictor", "predictionServer", "count"),
        ("router", "latencyPredictor", "trainingServer", "resource", "limits"),
        ("latencyPredictor", "enabled"),
        ("router", "latencyPredictor", "trainingServer", "image", "pullSecret"),
    ],
)
def test_the_check_finds_a_key_the_chart_does_not_have(path: tuple[str, ...]) -> None:
    tree = values()
    node = tree
    for key in path[:-1]:
        node = node.setdefault(key, {})
    node[path[-1]] = "x"
    assert unknown_keys(tree) == [".".join(path)]


@pytest.mark.parametrize("name", SERVERS)
def test_config_keys_are_names_the_server_or_the_chart_knows(name: str) -> None:
    known = env_names(SETTINGS[name]) | set(CHART_CONFIG[name])
    assert set(server(values(), name)["config"]) <= known


def test_one_image_for_both_sidecars_and_its_own_default_command() -> None:
    trainer, predictors = (server(values(), name) for name in SERVERS)
    assert trainer["image"] == predictors["image"]
    assert set(trainer["image"]) == {"registry", "repository", "tag"}
    assert not any(k in part for part in (trainer, predictors) for k in ("command", "args"))


def mebibytes(quantity: str) -> float:
    units = {"Mi": 1.0, "Gi": 1024.0}
    return float(quantity[:-2]) * units[quantity[-2:]]


def cpus(quantity: str) -> float:
    return float(quantity[:-1]) / 1000 if quantity.endswith("m") else float(quantity)


@pytest.mark.parametrize("name", SERVERS)
def test_requests_fit_within_limits(name: str) -> None:
    resources = server(values(), name)["resources"]
    requests, limits = resources["requests"], resources["limits"]
    assert cpus(requests["cpu"]) <= cpus(limits["cpu"])
    assert mebibytes(requests["memory"]) <= mebibytes(limits["memory"])


def test_prediction_workers_follow_the_cpu_limit_and_fit_in_memory() -> None:
    """One worker per CPU of the limit; each ~106 MB with a model, plus ~80 MB for uvicorn's
    parent and helper (measured in tests/e2e/test_llm_d_chart.py), with 25 % headroom."""
    predictors = server(values(), "predictionServers")
    workers = int(predictors["config"]["UVICORN_WORKERS"])
    assert workers == math.ceil(cpus(predictors["resources"]["limits"]["cpu"]))
    assert mebibytes(predictors["resources"]["limits"]["memory"]) >= 1.25 * (80 + 106 * workers)


def chart_env(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The environment the chart gives a container with these values: its default config
    merged with ours (Helm merges maps key by key), then its own variables."""
    for env_name in env_names(TrainingSettings) | env_names(PredictionSettings):
        monkeypatch.delenv(env_name, raising=False)
    config = {**CHART_CONFIG[name], **server(values(), name)["config"]}
    config.update(
        {"SERVER_TYPE": "training"}
        if name == "trainingServer"
        else {"SERVER_TYPE": "prediction-1", "PREDICT_PORT": "8001"}
    )
    if name == "predictionServers":
        config["TRAINING_SERVER_URL"] = "http://localhost:8000"
    for key, value in config.items():
        monkeypatch.setenv(key, value)


def test_the_trainer_these_values_make(monkeypatch: pytest.MonkeyPatch) -> None:
    chart_env("trainingServer", monkeypatch)
    settings = TrainingSettings()
    assert settings.objective_type.value == "quantile"
    assert settings.model_dir == Path("/models") / LLM_D_HOME / "models"
    assert settings.db_url == f"sqlite:////models/{LLM_D_HOME}/latency.db"
    assert settings.max_training_data_size_per_bucket == 10_000
    assert (settings.retraining_interval_sec, settings.port) == (10.0, 8000)


def test_the_prediction_servers_these_values_make(monkeypatch: pytest.MonkeyPatch) -> None:
    chart_env("predictionServers", monkeypatch)
    settings = PredictionSettings()
    assert settings.objective_type.value == "quantile"
    assert settings.model_dir == Path("/server_models") / LLM_D_HOME / "models"
    assert (settings.workers, settings.model_sync_interval_sec) == (2, 1.0)
    assert (settings.host, settings.port) == ("0.0.0.0", 8001)
    assert settings.training_server_url == "http://localhost:8000"
