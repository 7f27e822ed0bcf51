"""The postgres overlay's hourly `latency-predictor advise`: a real invocation of the command
(its arguments parsed and checked by the parser the CLI gives `advise`), reading the
trainer's store from the same Secret, writing the file the trainer serves as GET /advice (as
the trainer's own settings, from its rendered environment, resolve it), on the same claim,
and run as the servers are. The schemas are test_manifests' (every rendered object)."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import Any

import pytest

from advisor.command import UsageProblem, check, json_path
from latency_cli.main import build_parser
from shared.settings import TrainingSettings, env_names
from tests.k8s.test_manifests import Docs, of_kind, render

ROOT = Path(__file__).resolve().parents[2]
# What Kubernetes expands $(LATENCY_DB_URL) to, for the parser: a PostgreSQL URL.
DB_URL = "postgresql+psycopg://u@h/db"


def cronjob_pod() -> dict[str, Any]:
    job = of_kind(render("postgres"), "CronJob")["latency-advise"]
    pod: dict[str, Any] = job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return pod


def trainer_pod(docs: Docs) -> dict[str, Any]:
    pod: dict[str, Any] = of_kind(docs, "Deployment")["latency-training"]["spec"]["template"]
    return pod["spec"]  # type: ignore[no-any-return]


def parsed(container: dict[str, Any]) -> argparse.Namespace:
    """The container's arguments as `latency-predictor advise` parses and checks them."""
    assert container["command"] == ["latency-predictor"] and container["args"][0] == "advise"
    args = [DB_URL if a == "$(LATENCY_DB_URL)" else a for a in container["args"][1:]]
    namespace = build_parser("advise").parse_args(["advise", *args])  # the CLI's own parser
    check(namespace)  # raises on what advise would refuse
    return namespace


def trainer_settings(docs: Docs, monkeypatch: pytest.MonkeyPatch) -> TrainingSettings:
    """The trainer's settings as its rendered environment gives them: its ConfigMaps and
    env values (values from Secrets left out: none of them says where the advice file is)."""
    (container,) = trainer_pod(docs)["containers"]
    maps = of_kind(docs, "ConfigMap")
    env: dict[str, str] = {}
    for ref in container.get("envFrom", []):
        env.update(maps[ref["configMapRef"]["name"]].get("data", {}))
    env.update({e["name"]: e["value"] for e in container.get("env", []) if "value" in e})
    for name in env_names(TrainingSettings):  # this process's own settings do not count
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return TrainingSettings()


def claim(pod: dict[str, Any], volume: str) -> str | None:
    """The claim a pod's volume is, None for any other kind of volume."""
    (found,) = [v for v in pod["volumes"] if v["name"] == volume]
    pvc = found.get("persistentVolumeClaim")
    return None if pvc is None else str(pvc["claimName"])


def test_the_command_is_the_images_latency_predictor() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["latency-predictor"] == "latency_cli.main:main"
    (container,) = cronjob_pod()["containers"]
    (training,) = trainer_pod(render("postgres"))["containers"]
    assert container["image"] == training["image"]  # `kustomize edit set image` moves both


def test_the_parser_refuses_what_advise_would() -> None:
    """parsed() is a real check: a misspelt flag or a bad value fails it."""
    good = {"command": ["latency-predictor"], "args": ["advise", "--db", DB_URL, "--pods", "8"]}
    assert parsed(good).pods == 8
    for bad in (["--pod", "8"], ["--pods", "8", "--pool", "Bad_Name"], ["--pods", "0"]):
        with pytest.raises((SystemExit, UsageProblem)):  # argparse's, or advise's refusal
            parsed({**good, "args": ["advise", "--db", DB_URL, *bad]})


def test_the_cronjob_runs_advise_on_the_trainers_store() -> None:
    docs = render("postgres")
    pod = cronjob_pod()
    (container,) = pod["containers"]
    args = parsed(container)
    assert args.db == DB_URL and args.pods >= 1 and args.json
    env = {e["name"]: e for e in container["env"]}
    (training,) = trainer_pod(docs)["containers"]
    trainer_env = {e["name"]: e for e in training["env"]}
    assert env["LATENCY_DB_URL"]["valueFrom"] == trainer_env["LATENCY_DB_URL"]["valueFrom"]
    job = of_kind(docs, "CronJob")["latency-advise"]["spec"]
    assert job["concurrencyPolicy"] == "Forbid"  # never two simulations at once
    assert pod["restartPolicy"] == "Never"


def test_the_cronjob_writes_where_the_trainer_serves_get_advice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    docs = render("postgres")
    pod = cronjob_pod()
    (container,) = pod["containers"]
    args = parsed(container)
    written = json_path(args.json, args.pool)
    assert written.is_absolute()
    # The trainer's advice file for that pool, from its own rendered configuration.
    assert written == trainer_settings(docs, monkeypatch).advice_path(args.pool)
    # ... on the claim the trainer mounts at the same place, writable by both.
    trainer = trainer_pod(docs)
    mount = next(m for m in container["volumeMounts"] if written.is_relative_to(m["mountPath"]))
    (training,) = trainer["containers"]
    theirs = next(m for m in training["volumeMounts"] if m["mountPath"] == mount["mountPath"])
    assert claim(pod, mount["name"]) == "latency-models" == claim(trainer, theirs["name"])
    assert not mount.get("readOnly")
    # A second pod on any node mounts it only because the claim is ReadWriteMany.
    pvc = of_kind(docs, "PersistentVolumeClaim")["latency-models"]
    assert "ReadWriteMany" in pvc["spec"]["accessModes"]


def test_the_cronjob_runs_as_the_servers_do() -> None:
    pod = cronjob_pod()
    (container,) = pod["containers"]
    trainer = trainer_pod(render("postgres"))
    (training,) = trainer["containers"]
    assert pod["securityContext"] == trainer["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"] and pod["securityContext"]["runAsUser"] == 10001
    assert container["securityContext"] == training["securityContext"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False and pod["enableServiceLinks"] is False
    for part in ("requests", "limits"):
        assert {"cpu", "memory"} <= set(container["resources"][part]), part
    tmp = next(m for m in container["volumeMounts"] if m["mountPath"] == "/tmp")  # HOME, servers
    assert [v for v in pod["volumes"] if v["name"] == tmp["name"]] == [
        {"name": tmp["name"], "emptyDir": {}}
    ]
