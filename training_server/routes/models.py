"""Model routes of the contract: download info, tree dumps, files, export and import."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool

from shared.archive import import_bundle, pack_bundle, pack_files
from shared.artifact import BundleError, bundle_dir_for
from shared.backends import XGBoostBackend, backend_for
from shared.live_calibration import LIVE_CALIBRATION
from shared.predictor import LoadedBundle, load_bundle
from shared.prior import PRIOR_VERSION
from shared.settings import ModelType, TrainingSettings
from shared.targets import Target
from shared.web.auth import Access, require
from shared.wire import rfc3339
from training_server.deps import OpenedPoolDep, PublishedBundle, SettingsDep, StoreDep
from training_server.model_downloads import (
    MODEL_NAMES,
    UnknownModel,
    cold_start_files,
    file_info,
    model_file,
    native_file,
)
from training_server.routes.ops import store_counts

router = APIRouter()


def _model_of(
    bundle: LoadedBundle | None, target: Target, model_type: ModelType
) -> tuple[LoadedBundle, Any]:
    if bundle is None or bundle.model_type is not model_type or not bundle.has_model(target):
        raise HTTPException(404, f"no {model_type.value} {target.value} model is published")
    return bundle, bundle.models[target]


def _file_of(bundle: LoadedBundle | None, settings: TrainingSettings, name: str) -> Path | None:
    try:
        return model_file(bundle, settings, name)
    except UnknownModel:
        raise HTTPException(
            404, f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}"
        ) from None


@router.get("/model/download/info", dependencies=require(Access.EPP))
async def download_info(bundle: PublishedBundle, settings: SettingsDep) -> dict[str, Any]:
    model_type = bundle.model_type if bundle else settings.model_type
    if model_type is ModelType.XGBOOST:
        endpoints: dict[str, Any] = {
            "trees": {"ttft_trees": "/model/ttft/xgb/json", "tpot_trees": "/model/tpot/xgb/json"}
        }
    else:
        endpoints = {"text": {t.value: f"/model/{t.value}/lgb/txt" for t in Target}}
    return {
        "model_type": model_type.value,
        "objective_type": (bundle.objective if bundle else settings.objective_type).value,
        "quantile": bundle.quantile if bundle else settings.quantile_alpha,
        "model_version": bundle.version if bundle else None,
        "available_endpoints": endpoints,
        "model_status": {
            f"{t.value}_model_ready": bool(bundle and bundle.has_model(t)) for t in Target
        },
    }


@router.get("/model/{target}/xgb/json", dependencies=require(Access.EPP))
async def xgb_trees(bundle: PublishedBundle, target: Target) -> Response:
    _, model = _model_of(bundle, target, ModelType.XGBOOST)
    dumps = XGBoostBackend().tree_dumps(model)
    return Response(b"[" + ",".join(dumps).encode() + b"]", media_type="application/json")


@router.get("/model/{target}/lgb/txt", dependencies=require(Access.EPP))
async def lgb_text(bundle: PublishedBundle, settings: SettingsDep, target: Target) -> Response:
    served, _ = _model_of(bundle, target, ModelType.LIGHTGBM)
    path = native_file(served, settings, target)
    assert path is not None  # _model_of proved the model exists
    return Response(path.read_bytes(), media_type="text/plain; charset=utf-8")


@router.get("/model/{target}/lgb/importances", dependencies=require(Access.EPP))
async def lgb_importances(bundle: PublishedBundle, target: Target) -> dict[str, float]:
    served, model = _model_of(bundle, target, ModelType.LIGHTGBM)
    return backend_for(ModelType.LIGHTGBM).importances(model, served.features[target])


@router.get("/model/{name}/info", dependencies=require(Access.EPP))
async def model_info(bundle: PublishedBundle, settings: SettingsDep, name: str) -> dict[str, Any]:
    path = _file_of(bundle, settings, name)
    return {
        "model_name": name,
        "path": str(path) if path else None,
        **file_info(path),
        "model_type": (bundle.model_type if bundle else settings.model_type).value,
        "quantile": bundle.quantile if bundle else settings.quantile_alpha,
        "model_version": bundle.version if bundle else None,
    }


@router.get("/model/{name}/download", dependencies=require(Access.EPP))
async def model_download(bundle: PublishedBundle, settings: SettingsDep, name: str) -> Response:
    path = _file_of(bundle, settings, name)
    if path is None or not path.is_file():
        raise HTTPException(404, f"model {name!r} is not published yet")
    return Response(
        path.read_bytes(),
        media_type="application/octet-stream",
        headers={"Content-Disposition": f'attachment; filename="{path.name}"'},
    )


@router.get("/calibration", dependencies=require(Access.EPP))
async def live_calibration(settings: SettingsDep) -> Response:
    """The live calibration file (shared.live_calibration), for prediction servers that
    mirror from the trainer instead of sharing the model directory; 404 while there is none."""
    try:
        data = await run_in_threadpool((settings.model_dir / LIVE_CALIBRATION).read_bytes)
    except FileNotFoundError:
        raise HTTPException(404, "no live calibration is published") from None
    return Response(data, media_type="application/json")


@router.get("/models/list", dependencies=require(Access.EPP))
async def models_list(bundle: PublishedBundle, settings: SettingsDep) -> dict[str, Any]:
    return {
        "models": {name: file_info(_file_of(bundle, settings, name)) for name in MODEL_NAMES},
        "model_type": (bundle.model_type if bundle else settings.model_type).value,
        "quantile": bundle.quantile if bundle else settings.quantile_alpha,
        "model_version": bundle.version if bundle else None,
        "server_time": rfc3339(datetime.now(UTC)),
    }


@router.get("/model/export", dependencies=require(Access.ADMIN))
async def model_export(bundle: PublishedBundle, settings: SettingsDep, store: StoreDep) -> Response:
    """The published bundle as a tar.gz with metadata.json; before any bundle, the cold start:
    metadata naming the documented prior (and the prior's legacy files, when on), which
    import refuses as holding no model."""
    counts = await store_counts(store)
    published = bundle if bundle is not None and bundle.manifest is not None else None
    version = published.version if published else PRIOR_VERSION
    metadata = {
        "model_type": (bundle.model_type if bundle else settings.model_type).value,
        "objective_type": (bundle.objective if bundle else settings.objective_type).value,
        "quantile_alpha": bundle.quantile if bundle else settings.quantile_alpha,
        "model_version": version,
        "cold_start": published is None,
        "exported_at": rfc3339(datetime.now(UTC)),
        # llm-d's names for the training rows, and ours per split
        **{f"{t.value}_samples": n for t, n in counts.training.by_target.items()},
        "sample_counts": counts.as_json(),
    }
    if published is None:
        data = await run_in_threadpool(pack_files, cold_start_files(settings), metadata)
    else:
        folder = bundle_dir_for(settings.model_dir, version)
        data = await run_in_threadpool(pack_bundle, folder, metadata)
    return Response(
        data,
        media_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="model-{version}.tar.gz"'},
    )


@router.post("/model/import", dependencies=require(Access.ADMIN))
async def model_import(request: Request, pool: OpenedPoolDep) -> dict[str, Any]:
    """Publish an exported bundle (verified first): seeds a cold start or rolls back."""
    settings, slot = pool.settings, pool.slot
    archive = await request.body()
    try:
        version = await run_in_threadpool(
            import_bundle, settings.model_dir, archive, keep=settings.keep_model_versions
        )
        bundle = await run_in_threadpool(load_bundle, settings.model_dir, version)
    except BundleError as exc:
        raise HTTPException(422, f"bundle refused: {exc}") from exc
    slot.publish(bundle)
    return {"imported": True, "model_version": version}
