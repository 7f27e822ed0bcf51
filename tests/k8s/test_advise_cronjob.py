"""The postgres overlay's hourly `latency-predictor advise`: a real invocation of the command
(its arguments parsed by the command's own parser), reading the trainer's store from the
same Secret, and writing the file the trainer serves as GET /advice, on the same claim."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from advisor.command import add_arguments, check, json_path
from shared.settings import TrainingSettings
from tests.k8s.test_manifests import of_kind, render


def cronjob_pod() -> dict[str, Any]:
    job = of_kind(render("postgres"), "CronJob")["latency-advise"]
    pod: dict[str, Any] = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod


def parsed(container: dict[str, Any]) -> argparse.Namespace:
    """The container's arguments as `latency-predictor advise` parses and checks them, with
    the $(LATENCY_DB_URL) Kubernetes expands standing as a PostgreSQL URL."""
    assert container["command"] == ["latency-predictor"] and container["args"][0] == "advise"
    args = [
        "postgresql+psycopg://u@h/db" if a == "$(LATENCY_DB_URL)" else a
        for a in container["args"][1:]
    ]
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    namespace = parser.parse_args(args)
    check(namespace)  # raises on what advise would refuse
    return namespace


def test_the_cronjob_runs_advise_on_the_trainers_store() -> None:
    pod = cronjob_pod()
    (container,) = pod["containers"]
    args = parsed(container)
    assert args.db.startswith("postgresql") and args.pods >= 1
    env = {e["name"]: e for e in container["env"]}
    trainer = of_kind(render("postgres"), "Deployment")["latency-training"]
    (training,) = trainer["spec"]["template"]["spec"]["containers"]
    trainer_env = {e["name"]: e for e in training["env"]}
    assert env["LATENCY_DB_URL"]["valueFrom"] == trainer_env["LATENCY_DB_URL"]["valueFrom"]


def test_the_cronjob_writes_where_the_trainer_serves_get_advice() -> None:
    docs = render("postgres")
    pod = cronjob_pod()
    (container,) = pod["containers"]
    args = parsed(container)
    # The trainer's advice file for that pool, from its own configuration.
    config = of_kind(docs, "ConfigMap")["latency-training-config"]["data"]
    settings = TrainingSettings(model_dir=Path(config["LATENCY_MODEL_DIR"]))
    written = json_path(args.json, args.pool)
    assert written == settings.advice_path(args.pool)
    # ... on the claim the trainer's model directory is.
    trainer = of_kind(docs, "Deployment")["latency-training"]["spec"]["template"]["spec"]
    mount = next(m for m in container["volumeMounts"] if written.is_relative_to(m["mountPath"]))
    (training,) = trainer["containers"]
    theirs = next(m for m in training["volumeMounts"] if m["mountPath"] == mount["mountPath"])
    assert claim(pod, mount["name"]) == "latency-models" == claim(trainer, theirs["name"])
    assert not mount.get("readOnly")


def claim(pod: dict[str, Any], volume: str) -> str | None:
    """The claim a pod's volume is, None for any other kind of volume."""
    (found,) = [v for v in pod["volumes"] if v["name"] == volume]
    pvc = found.get("persistentVolumeClaim")
    return None if pvc is None else str(pvc["claimName"])


def test_the_cronjob_runs_as_the_servers_do() -> None:
    pod = cronjob_pod()
    (container,) = pod["containers"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert {"cpu", "memory"} <= set(container["resources"]["limits"])
    assert any(m["mountPath"] == "/tmp" for m in container["volumeMounts"])  # the simulation's
