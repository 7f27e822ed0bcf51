"""Render k8s/ base and every overlay with `kubectl kustomize`, validate the output against the
Kubernetes schemas offline (kubernetes-validate, strict), and check what the schemas cannot."""

from __future__ import annotations

import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from shared.settings import PredictionSettings, TrainingSettings

K8S = Path(__file__).resolve().parents[2] / "k8s"
TARGETS = {
    "base": K8S / "base",
    "single-node": K8S / "overlays" / "single-node",
    "postgres": K8S / "overlays" / "postgres",
    "epp-sidecar": K8S / "overlays" / "epp-sidecar",
}
KUBERNETES_VERSION = "1.30.0"  # schemas shipped offline by every kubernetes-validate >= 1.30
IMAGE = "latency-predictor"


def env_names(settings: type) -> set[str]:
    return {n for f in settings.model_fields.values() for n in f.validation_alias.choices}


SERVER_ENV = {
    "training_server": env_names(TrainingSettings),
    "prediction_server": env_names(PredictionSettings),
}
ALL_ENV = set().union(*SERVER_ENV.values())


@cache
def render(name: str) -> tuple[dict[str, Any], ...]:
    kubectl = shutil.which("kubectl") or shutil.which("/usr/bin/kubectl")
    if kubectl is None:
        pytest.fail(
            "kubectl not found on PATH nor at /usr/bin/kubectl: it is needed to render "
            "k8s/ (`kubectl kustomize`); install kubectl, do not skip these tests"
        )
    proc = subprocess.run(
        [kubectl, "kustomize", str(TARGETS[name])],
        check=False,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"kubectl kustomize {name} failed:\n{proc.stderr}"
    docs = tuple(d for d in yaml.safe_load_all(proc.stdout) if d)
    assert docs, f"{name} rendered nothing"
    return docs


def of_kind(docs, kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def our_containers(docs):
    """(pod spec, container, server module) for every container running our image."""
    for d in docs:
        if d["kind"] == "Deployment":
            pod = d["spec"]["template"]["spec"]
            for c in pod["containers"]:
                if c["image"].split(":")[0].endswith(IMAGE):
                    yield pod, c, c["command"][-1]


def schema_errors(doc: dict[str, Any]) -> str | None:
    try:
        kubernetes_validate.validate(doc, KUBERNETES_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        path = ".".join(str(p) for p in exc.absolute_path)
        return f"{doc['kind']}/{doc['metadata'].get('name')}: {path}: {exc.message}"
    return None


def test_the_validator_rejects_a_broken_manifest() -> None:
    broken = yaml.safe_load((TARGETS["base"] / "prediction" / "deployment.yaml").read_text())
    broken["spec"]["replicas"] = "three"
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGett"] = {}
    assert schema_errors(broken) is not None


@pytest.mark.parametrize("name", TARGETS)
def test_renders_and_matches_the_kubernetes_schemas(name: str) -> None:
    errors = [e for e in map(schema_errors, render(name)) if e]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("name", TARGETS)
def test_configmap_keys_and_env_are_setting_names(name: str) -> None:
    docs = render(name)
    maps = of_kind(docs, "ConfigMap")
    for cm_name, cm in maps.items():
        assert set(cm.get("data", {})) <= ALL_ENV, (cm_name, set(cm["data"]) - ALL_ENV)
    containers = list(our_containers(docs))
    assert containers
    for _pod, c, server in containers:
        names = {e["name"] for e in c.get("env", [])}
        for ref in c.get("envFrom", []):
            assert ref["configMapRef"]["name"] in maps, ref
            names |= set(maps[ref["configMapRef"]["name"]].get("data", {}))
        assert names <= SERVER_ENV[server], (c["name"], names - SERVER_ENV[server])
        assert "LATENCY_WORKERS" not in names, "workers derive from the CPU limit: leave it unset"


@pytest.mark.parametrize("name", TARGETS)
def test_our_containers_have_probes_resources_and_volumes(name: str) -> None:
    docs = render(name)
    claims = set(of_kind(docs, "PersistentVolumeClaim"))
    for pod, c, server in our_containers(docs):
        assert c["livenessProbe"]["httpGet"]["path"] == "/healthz", c["name"]
        assert c["readinessProbe"]["httpGet"]["path"] == "/readyz", c["name"]
        for part in ("requests", "limits"):
            assert {"cpu", "memory"} <= set(c["resources"][part]), (c["name"], part)
        volumes = {v["name"]: v for v in pod["volumes"]}
        for mount in c["volumeMounts"]:
            volume = volumes[mount["name"]]
            if "persistentVolumeClaim" in volume:
                assert volume["persistentVolumeClaim"]["claimName"] in claims, volume
            if mount["mountPath"] == "/models" and server == "prediction_server":
                assert mount.get("readOnly") is True, c["name"]


def test_base_runs_three_predictors_with_a_pdb_and_an_hpa() -> None:
    docs = render("base")
    deployments = of_kind(docs, "Deployment")
    assert deployments["latency-prediction"]["spec"]["replicas"] == 3
    training = deployments["latency-training"]["spec"]
    assert training["replicas"] == 1 and training["strategy"]["type"] == "Recreate"
    assert "latency-prediction" in of_kind(docs, "PodDisruptionBudget")
    hpa = of_kind(docs, "HorizontalPodAutoscaler")["latency-prediction"]
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 12)
    assert hpa["spec"]["metrics"][0]["resource"]["target"]["averageUtilization"] == 70
    assert set(of_kind(docs, "Service")) == {"latency-training", "latency-prediction"}


def test_single_node_keeps_sqlite_on_a_pvc_with_one_trainer() -> None:
    docs = render("single-node")
    training = of_kind(docs, "Deployment")["latency-training"]["spec"]
    assert training["replicas"] == 1 and training["strategy"]["type"] == "Recreate"
    claims = {
        v["persistentVolumeClaim"]["claimName"]
        for v in training["template"]["spec"]["volumes"]
        if "persistentVolumeClaim" in v
    }
    assert claims == {"latency-data", "latency-models"}


def test_postgres_reads_the_url_from_the_secret_and_runs_two_trainers() -> None:
    docs = render("postgres")
    training = of_kind(docs, "Deployment")["latency-training"]["spec"]
    assert training["replicas"] == 2 and training["strategy"]["type"] == "RollingUpdate"
    (container,) = training["template"]["spec"]["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["LATENCY_DB_URL"]["valueFrom"]["secretKeyRef"] == {
        "name": "latency-db",
        "key": "url",
    }
    assert "LATENCY_DB_URL" not in of_kind(docs, "ConfigMap")["latency-training-config"]["data"]
    assert "latency-training" in of_kind(docs, "PodDisruptionBudget")
    pvc = of_kind(docs, "PersistentVolumeClaim")["latency-models"]
    assert pvc["spec"]["accessModes"] == ["ReadWriteMany"]
    assert not of_kind(docs, "Secret"), "ship only secret.example.yaml, never a real Secret"


def test_epp_sidecar_puts_training_on_8000_and_predictions_on_8001_to_8003() -> None:
    docs = render("epp-sidecar")
    deployments = of_kind(docs, "Deployment")
    assert set(deployments) == {"epp"}, "the standalone latency Deployments must be dropped"
    assert not of_kind(docs, "Service") and not of_kind(docs, "HorizontalPodAutoscaler")
    ports: dict[str, list[int]] = {"training_server": [], "prediction_server": []}
    for _pod, c, server in our_containers(docs):
        (port,) = [p["containerPort"] for p in c["ports"]]
        assert c["args"][c["args"].index("--port") + 1] == str(port), c["name"]
        if server == "prediction_server":
            assert {"name": "PREDICT_PORT", "value": str(port)} in c["env"], c["name"]
        ports[server].append(port)
    assert ports == {"training_server": [8000], "prediction_server": [8001, 8002, 8003]}
    pod = deployments["epp"]["spec"]["template"]["spec"]
    epp = next(c for c in pod["containers"] if c["name"] == "epp")
    env = {e["name"]: e["value"] for e in epp["env"]}
    assert env["TRAINING_SERVER_URL"] == "http://localhost:8000"
    assert env["PREDICTION_SERVER_URL"] == ",".join(
        f"http://localhost:{p}" for p in (8001, 8002, 8003)
    )
    config = of_kind(docs, "ConfigMap")["latency-prediction-config"]["data"]
    assert config["TRAINING_SERVER_URL"] == "http://localhost:8000"
    models = next(v for v in pod["volumes"] if v["name"] == "latency-models")
    assert "emptyDir" in models
