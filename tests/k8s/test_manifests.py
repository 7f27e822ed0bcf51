"""Render k8s/ base and every overlay with `kubectl kustomize`, validate the output against the
Kubernetes schemas offline (kubernetes-validate, strict), and check what the schemas cannot.
PodMonitors (a Prometheus Operator CRD, in no Kubernetes schema) are checked structurally."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]  # it ships no type hints (no py.typed)
import pytest
import yaml
from fastapi.routing import APIRoute

from shared.settings import PredictionSettings, TrainingSettings, env_names

K8S = Path(__file__).resolve().parents[2] / "k8s"
TARGETS = {
    "base": K8S / "base",
    "single-node": K8S / "overlays" / "single-node",
    "postgres": K8S / "overlays" / "postgres",
    "epp-sidecar": K8S / "overlays" / "epp-sidecar",
    "monitoring": K8S / "overlays" / "monitoring",
}
KUBERNETES_VERSION = "1.30.0"  # schemas shipped offline by every kubernetes-validate >= 1.30
IMAGE = "latency-predictor"

Docs = tuple[dict[str, Any], ...]  # one rendered target's objects, as render returns them


SERVER_ENV = {
    "training_server": env_names(TrainingSettings),
    "prediction_server": env_names(PredictionSettings),
}
ALL_ENV = set().union(*SERVER_ENV.values())


@cache
def render(name: str) -> Docs:
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


def of_kind(docs: Docs, kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in docs if d["kind"] == kind}


def our_containers(docs: Docs) -> Iterator[tuple[dict[str, Any], dict[str, Any], str]]:
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


def is_dashboard(doc: dict[str, Any]) -> bool:
    """A ConfigMap the Grafana sidecar loads (its keys are dashboard files, not settings)."""
    if doc["kind"] != "ConfigMap":
        return False
    labels: dict[str, str] = doc["metadata"].get("labels", {})
    return labels.get("grafana_dashboard") == "1"


# PodMonitor (monitoring.coreos.com/v1): the fields of the Prometheus Operator's CRD (v0.91), so
# that a misspelt key fails here as an unknown field would in a strict schema.
PODMONITOR_SPEC = {
    "attachMetadata",
    "bodySizeLimit",
    "convertClassicHistogramsToNHCB",
    "fallbackScrapeProtocol",
    "jobLabel",
    "keepDroppedTargets",
    "labelLimit",
    "labelNameLengthLimit",
    "labelValueLengthLimit",
    "namespaceSelector",
    "nativeHistogramBucketLimit",
    "nativeHistogramMinBucketFactor",
    "podMetricsEndpoints",
    "podTargetLabels",
    "sampleLimit",
    "scrapeClass",
    "scrapeClassicHistograms",
    "scrapeNativeHistograms",
    "scrapeProtocols",
    "selector",
    "selectorMechanism",
    "targetLimit",
}
POD_METRICS_ENDPOINT = {
    "authorization",
    "basicAuth",
    "bearerTokenSecret",
    "enableHttp2",
    "filterRunning",
    "followRedirects",
    "honorLabels",
    "honorTimestamps",
    "interval",
    "metricRelabelings",
    "noProxy",
    "oauth2",
    "params",
    "path",
    "port",
    "portNumber",
    "proxyConnectHeader",
    "proxyFromEnvironment",
    "proxyUrl",
    "relabelings",
    "scheme",
    "scrapeTimeout",
    "targetPort",
    "tlsConfig",
    "trackTimestampsStaleness",
}
# The CRD's pattern for interval and scrapeTimeout.
DURATION = re.compile(r"0|(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?")
METRICS_PATH = "/metrics"  # served by both ops routers (test_both_servers_serve_metrics_*)


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """metav1.LabelSelector semantics: matchLabels AND every matchExpression."""
    if not selector.get("matchLabels") and not selector.get("matchExpressions"):
        return True  # the empty selector selects everything
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        key, op, values = e["key"], e["operator"], e.get("values", [])
        ok = {
            "In": key in labels and labels[key] in values,
            "NotIn": labels.get(key) not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }[op]
        if not ok:
            return False
    return True


def pod_templates(docs: Docs) -> dict[str, dict[str, Any]]:
    """Deployment name -> its pod template."""
    return {d["metadata"]["name"]: d["spec"]["template"] for d in docs if d["kind"] == "Deployment"}


def podmonitor_errors(doc: dict[str, Any], docs: Docs) -> list[str]:
    """What the PodMonitor CRD would refuse, plus what would make it scrape nothing: the
    selector must select rendered pods, and every endpoint port must be a container port
    name (or number) on each of them, serving /metrics."""
    name = doc.get("metadata", {}).get("name")
    where = f"PodMonitor/{name}"
    if doc.get("apiVersion") != "monitoring.coreos.com/v1" or doc.get("kind") != "PodMonitor":
        return [f"{where}: apiVersion/kind {doc.get('apiVersion')}/{doc.get('kind')}"]
    errors = _shape_errors(doc, where)
    spec = doc.get("spec", {})
    selector = spec.get("selector")
    if not isinstance(selector, dict) or not (
        selector.get("matchLabels") or selector.get("matchExpressions")
    ):
        return [*errors, f"{where}: spec.selector must select by labels"]
    pods = {
        deployment: template
        for deployment, template in pod_templates(docs).items()
        if selects(selector, template["metadata"].get("labels", {}))
    }
    if not pods:
        errors.append(f"{where}: the selector matches no rendered Deployment's pods")
    endpoints = spec.get("podMetricsEndpoints")
    if not isinstance(endpoints, list) or not endpoints:
        return [*errors, f"{where}: no podMetricsEndpoints"]
    for i, ep in enumerate(endpoints):
        at = f"{where}: podMetricsEndpoints.{i}"
        errors += _endpoint_errors(at, ep) + _endpoint_port_errors(at, ep, pods)
    return errors


def _shape_errors(doc: dict[str, Any], where: str) -> list[str]:
    errors = []
    if unknown := set(doc) - {"apiVersion", "kind", "metadata", "spec"}:
        errors.append(f"{where}: unknown top-level fields {sorted(unknown)}")
    if not doc.get("metadata", {}).get("name"):
        errors.append(f"{where}: no metadata.name")
    spec = doc.get("spec", {})
    if unknown := set(spec) - PODMONITOR_SPEC:
        errors.append(f"{where}: unknown spec fields {sorted(unknown)}")
    if set(spec.get("namespaceSelector", {})) - {"any", "matchNames"}:
        errors.append(f"{where}: namespaceSelector takes only any/matchNames")
    return errors


def _endpoint_errors(at: str, ep: dict[str, Any]) -> list[str]:
    """One podMetricsEndpoints entry against the CRD's fields and our /metrics."""
    errors = []
    if unknown := set(ep) - POD_METRICS_ENDPOINT:
        errors.append(f"{at}: unknown fields {sorted(unknown)}")
    if "targetPort" in ep:
        errors.append(f"{at}: targetPort is deprecated, name the port with `port`")
    if ("port" in ep) == ("portNumber" in ep):
        errors.append(f"{at}: set exactly one of port (a name) and portNumber")
    elif "port" in ep and not isinstance(ep["port"], str):
        errors.append(f"{at}: port must be a container port name, got {ep['port']!r}")
    if ep.get("path") != METRICS_PATH:
        errors.append(f"{at}: path {ep.get('path')!r}, not {METRICS_PATH}")
    if ep.get("scheme", "http") not in {"http", "https", "HTTP", "HTTPS"}:
        errors.append(f"{at}: scheme {ep['scheme']!r} is not in the CRD's enum")
    for key in ("interval", "scrapeTimeout"):
        if key in ep and not (ep[key] and DURATION.fullmatch(str(ep[key]))):
            errors.append(f"{at}: {key} {ep[key]!r} is not a duration")
    return errors


def _endpoint_port_errors(
    at: str, ep: dict[str, Any], pods: dict[str, dict[str, Any]]
) -> list[str]:
    """The endpoint's port must exist on every selected pod."""
    errors = []
    field, value = ("name", ep["port"]) if "port" in ep else ("containerPort", ep.get("portNumber"))
    for deployment, template in pods.items():
        ports = [p for c in template["spec"]["containers"] for p in c.get("ports", [])]
        if not any(p.get(field) == value for p in ports):
            errors.append(
                f"{at}: no container port {field}={value!r} in the pods of Deployment/{deployment}"
            )
    return errors


def object_errors(doc: dict[str, Any], docs: Docs) -> list[str]:
    """Strict Kubernetes schema for built-in kinds; the structural check for PodMonitors."""
    if doc.get("apiVersion", "").startswith("monitoring.coreos.com/"):
        return podmonitor_errors(doc, docs)
    error = schema_errors(doc)
    return [error] if error else []


def test_the_validator_rejects_a_broken_manifest() -> None:
    broken = yaml.safe_load((TARGETS["base"] / "prediction" / "deployment.yaml").read_text())
    broken["spec"]["replicas"] = "three"
    broken["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]["httpGett"] = {}
    assert schema_errors(broken) is not None


def test_the_podmonitor_check_rejects_broken_podmonitors() -> None:
    docs = render("monitoring")
    good = of_kind(docs, "PodMonitor")["latency-prediction"]
    assert podmonitor_errors(good, docs) == []

    def broken(**changes: Any) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(json.dumps(good))
        doc["spec"].update(changes)
        return doc

    endpoint = good["spec"]["podMetricsEndpoints"][0]
    cases = {
        "no container port": broken(podMetricsEndpoints=[{**endpoint, "port": "metrics"}]),
        "port number as name": broken(podMetricsEndpoints=[{**endpoint, "port": 8001}]),
        "deprecated": broken(podMetricsEndpoints=[{**endpoint, "targetPort": 8001}]),
        "path": broken(podMetricsEndpoints=[{**endpoint, "path": "/metrics/"}]),
        "scheme": broken(podMetricsEndpoints=[{**endpoint, "scheme": "grpc"}]),
        "misspelt": broken(podMetricsEndpoints=[{**endpoint, "intervall": "15s"}]),
        "duration": broken(podMetricsEndpoints=[{**endpoint, "interval": "15"}]),
        "unit order": broken(podMetricsEndpoints=[{**endpoint, "interval": "30s1m"}]),
        "selects nothing": broken(selector={"matchLabels": {"app.kubernetes.io/component": "x"}}),
        "selects everything": broken(selector={}),
        "spec typo": broken(podMetricEndpoints=[endpoint]),
        "api": {**good, "apiVersion": "monitoring.coreos.com/v1alpha1"},
    }
    for case, doc in cases.items():
        assert podmonitor_errors(doc, docs), case
    # A wrong port is found on the pods of every Deployment selected.
    both = broken(
        selector={"matchLabels": {"app.kubernetes.io/name": "latency-predictor"}},
        podMetricsEndpoints=[{**endpoint, "port": "nope"}],
    )
    assert len(podmonitor_errors(both, docs)) == 2


def test_selects_follows_label_selector_semantics() -> None:
    labels = {"a": "1", "b": "2"}
    assert selects({"matchLabels": {"a": "1"}}, labels)
    assert not selects({"matchLabels": {"a": "1", "c": "3"}}, labels)
    assert selects({"matchExpressions": [{"key": "b", "operator": "In", "values": ["2"]}]}, labels)
    assert not selects(
        {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, labels
    )
    assert selects({"matchExpressions": [{"key": "c", "operator": "DoesNotExist"}]}, labels)
    assert not selects({"matchExpressions": [{"key": "c", "operator": "Exists"}]}, labels)


@pytest.mark.parametrize("name", TARGETS)
def test_renders_and_matches_the_kubernetes_schemas(name: str) -> None:
    docs = render(name)
    errors = [e for d in docs for e in object_errors(d, docs)]
    assert not errors, "\n".join(errors)


@pytest.mark.parametrize("name", TARGETS)
def test_configmap_keys_and_env_are_setting_names(name: str) -> None:
    docs = render(name)
    maps = of_kind(docs, "ConfigMap")
    for cm_name, cm in maps.items():
        if is_dashboard(cm):
            continue  # test_monitoring_ships_the_dashboard_for_the_grafana_sidecar
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


def test_both_servers_serve_metrics_where_the_podmonitors_scrape() -> None:
    from prediction_server.routes import ops as prediction_ops
    from training_server.routes import ops as training_ops

    for router in (prediction_ops.router, training_ops.router):
        paths = {route.path for route in router.routes if isinstance(route, APIRoute)}
        assert METRICS_PATH in paths


def test_monitoring_scrapes_each_server_once_on_the_port_it_binds() -> None:
    docs = render("monitoring")
    monitors = of_kind(docs, "PodMonitor")
    assert set(monitors) == {"latency-training", "latency-prediction"}
    scraped: dict[str, list[str]] = {}
    for monitor_name, monitor in monitors.items():
        for deployment, template in pod_templates(docs).items():
            if selects(monitor["spec"]["selector"], template["metadata"]["labels"]):
                scraped.setdefault(deployment, []).append(monitor_name)
                ports = {
                    p["name"]: (p["containerPort"], c)
                    for c in template["spec"]["containers"]
                    for p in c.get("ports", [])
                }
                for ep in monitor["spec"]["podMetricsEndpoints"]:
                    port, container = ports[ep["port"]]
                    args = container["args"]
                    assert args[args.index("--port") + 1] == str(port), (monitor_name, ep)
    # Every Deployment of ours is scraped, and by one PodMonitor only (no double counting).
    ours = {d["metadata"]["name"] for d in docs if d["kind"] == "Deployment"}
    assert scraped == {
        "latency-training": ["latency-training"],
        "latency-prediction": ["latency-prediction"],
    }, scraped
    assert set(scraped) == ours


def test_monitoring_is_single_node_plus_the_podmonitors_and_the_dashboard() -> None:
    single, monitoring = render("single-node"), render("monitoring")

    def key(d: dict[str, Any]) -> tuple[str, str]:
        return d["kind"], d["metadata"]["name"]

    added = {key(d) for d in monitoring} - {key(d) for d in single}
    assert added == {
        ("PodMonitor", "latency-training"),
        ("PodMonitor", "latency-prediction"),
        ("ConfigMap", "latency-predictor-dashboard"),
    }
    assert [d for d in monitoring if key(d) not in added] == list(single)


def test_monitoring_ships_the_dashboard_for_the_grafana_sidecar() -> None:
    dashboards = [d for d in render("monitoring") if is_dashboard(d)]
    (cm,) = dashboards
    # No hash suffix: the sidecar finds it by label, and a new name per edit would leave the
    # old ConfigMap, with the same dashboard uid, behind.
    assert cm["metadata"]["name"] == "latency-predictor-dashboard"
    ((key, text),) = cm["data"].items()
    assert key.endswith(".json"), key
    source = TARGETS["monitoring"] / "grafana-dashboard.json"
    assert json.loads(text) == json.loads(source.read_text())
    # Client-side `kubectl apply` copies the object into an annotation, capped at 256 KiB.
    assert len(text.encode()) < 200_000
