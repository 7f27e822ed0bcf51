"""Operations routes of the prediction server: probes, status, reload, metrics."""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import asdict
from typing import Any

import httpx
from fastapi import APIRouter, Response
from prometheus_client import generate_latest

from prediction_server.deps import (
    MetricRegistryDep,
    PoolDep,
    PoolsDep,
    PoolSettingsDep,
    ServingBundle,
    WatcherDep,
)
from prediction_server.watcher import ModelWatcher
from shared.predictor import LoadedBundle
from shared.targets import TARGETS
from shared.web.auth import Access, require
from shared.wire import rfc3339

router = APIRouter()


def _model_fields(bundle: LoadedBundle) -> dict[str, Any]:
    manifest = bundle.manifest
    return {
        "model_type": bundle.model_type.value,
        "objective_type": bundle.objective.value,
        "quantile": bundle.quantile,
        "model_version": bundle.version,
        "model_created_at": rfc3339(manifest.created_at) if manifest else None,
        "model_age_seconds": (time.time() - manifest.created_at.timestamp()) if manifest else None,
    }


def _needs_newer(watcher: ModelWatcher | None) -> dict[str, Any] | None:
    needed = watcher.needs_newer if watcher else None
    return None if needed is None else asdict(needed)


@router.get("/", dependencies=require(Access.EPP))
async def root(bundle: ServingBundle) -> dict[str, Any]:
    return {
        "service": "latency-predictor prediction server",
        "description": "Answers p90 TTFT/TPOT predictions from the newest published bundle; "
        "POST /predict/bulk/strict is the hot path.",
        "docs": "/docs",
        "model_version": bundle.version,
    }


@router.get("/healthz")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get("/readyz")
async def readyz(bundle: ServingBundle) -> dict[str, Any]:
    """Always ready: until a trained bundle lands the documented cold-start prior answers."""
    return {"status": "ready", "model_version": bundle.version, "cold_start": bundle.is_prior}


@router.get("/status", dependencies=require(Access.EPP))
async def status(
    bundle: ServingBundle, settings: PoolSettingsDep, watcher: WatcherDep
) -> dict[str, Any]:
    return {
        "is_ready": True,
        **_model_fields(bundle),
        "last_model_load": None if bundle.is_prior else rfc3339(bundle.loaded_at),
        "training_server_url": settings.training_server_url,
        # shared-dir or trainer-sync, and why (shared.model_source)
        "model_source": settings.model_source.value,
        "model_source_reason": settings.model_source_reason,
        "models_exist": {f"{t.value}_model": bundle.has_model(t) for t in TARGETS},
        # llm-d's queue-gated ensemble (separate no-queue and queued models): never served
        # here, where is_queued and the queue length are features of one model per target.
        "ensemble_active": False,
        "cold_start": bundle.is_prior,
        "refused_versions": watcher.refused if watcher else {},
        # {version, bundle_format, reads_up_to} of the newest bundle refused because it
        # needs a newer server; null when none (or a later bundle is served)
        "needs_newer_server": _needs_newer(watcher),
        # log-factors on the model's answer: the bundle's conformal one and the live one
        "calibration": {
            t.value: {
                "bundle_log_offset": bundle.log_offsets.get(t, 0.0),
                "live_log_offset": bundle.live_log_offset(t),
                # per group of rows (P/D role, hardware class), where the pool has them
                "live_group_log_offsets": {
                    name: offsets[t] for name, offsets in bundle.live.groups.items() if t in offsets
                },
            }
            for t in TARGETS
        },
        "worker_pid": os.getpid(),  # with several workers, each answers for itself
    }


@router.post("/reload", dependencies=require(Access.ADMIN))
async def reload(pool: PoolDep, pools: PoolsDep) -> dict[str, Any]:
    """Look for a newer bundle now instead of at the next poll (and, for a pool not served
    yet, for the pool)."""
    if pool.watcher is None:
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, OSError):
            await pools.discover()  # a trainer away: the pool answers from the prior
        pool = pools.resolve(pool.name)
    synced, loaded = await pool.watcher.reload() if pool.watcher else (False, False)
    bundle = pool.slot.serving
    return {
        "synced": synced,
        "loaded": loaded,
        "is_ready": True,
        **_model_fields(bundle),
        "last_load_time": None if bundle.is_prior else rfc3339(bundle.loaded_at),
    }


@router.get("/metrics", dependencies=require(Access.EPP))
async def metrics(registry: MetricRegistryDep) -> Response:
    """Every pool's series (a named pool's labelled with it), the same on every prefix."""
    return Response(
        generate_latest(registry),
        media_type="text/plain; version=0.0.4; charset=utf-8",
    )
