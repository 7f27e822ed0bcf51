"""Model routes of the contract: download info, tree dumps, files, export and import."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Request, Response
from fastapi.concurrency import run_in_threadpool

from shared.archive import import_bundle, pack_bundle
from shared.artifact import MANIFEST, BundleError, bundle_dir_for
from shared.backends import XGBoostBackend, backend_for
from shared.live_calibration import LIVE_CALIBRATION
from shared.predictor import LoadedBundle, load_bundle
from shared.settings import ModelType, TrainingSettings
from shared.targets import Target
from shared.web.auth import Access, require
from shared.wire import rfc3339
from training_server.deps import PublishedBundle, SettingsDep, SlotDep, StoreDep
from training_server.routes.ops import store_counts

router = APIRouter()
MODEL_NAMES = ("ttft", "tpot", "manifest")


def _model_of(bundle: LoadedBundle | None, target: Target,
              model_type: ModelType) -> tuple[LoadedBundle, Any]:
    if bundle is None or bundle.model_type is not model_type or not bundle.has_model(target):
        raise HTTPException(404, f"no {model_type.value} {target.value} model is published")
    return bundle, bundle.models[target]


def _file_of(bundle: LoadedBundle | None, settings: TrainingSettings, name: str) -> Path | None:
    if name not in MODEL_NAMES:
        raise HTTPException(404, f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    if bundle is None or bundle.manifest is None:
        return None
    folder = bundle_dir_for(settings.model_dir, bundle.version)
    if name == "manifest":
        return folder / MANIFEST
    entry = bundle.manifest.targets[Target(name)]
    return None if entry.file is None else folder / entry.file


def _file_info(path: Path | None) -> dict[str, Any]:
    exists = path is not None and path.is_file()
    stat = path.stat() if exists and path else None
    return {
        "exists": exists,
        "size_bytes": stat.st_size if stat else 0,
        "last_modified": rfc3339(datetime.fromtimestamp(stat.st_mtime, UTC)) if stat else None,
    }


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
    path = _file_of(served, settings, target.value)
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
        **_file_info(path),
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
        path.read_bytes(), media_type="application/octet-stream",
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
        "models": {name: _file_info(_file_of(bundle, settings, name)) for name in MODEL_NAMES},
        "model_type": (bundle.model_type if bundle else settings.model_type).value,
        "quantile": bundle.quantile if bundle else settings.quantile_alpha,
        "model_version": bundle.version if bundle else None,
        "server_time": rfc3339(datetime.now(UTC)),
    }


@router.get("/model/export", dependencies=require(Access.ADMIN))
async def model_export(bundle: PublishedBundle, settings: SettingsDep,
                       store: StoreDep) -> Response:
    if bundle is None or bundle.manifest is None:
        raise HTTPException(404, "no model is published yet")
    counts = await store_counts(store)
    metadata = {
        "model_type": bundle.model_type.value,
        "objective_type": bundle.objective.value,
        "quantile_alpha": bundle.quantile,
        "model_version": bundle.version,
        "exported_at": rfc3339(datetime.now(UTC)),
        "sample_counts": counts,
    }
    data = await run_in_threadpool(
        pack_bundle, bundle_dir_for(settings.model_dir, bundle.version), metadata
    )
    return Response(
        data, media_type="application/gzip",
        headers={"Content-Disposition": f'attachment; filename="model-{bundle.version}.tar.gz"'},
    )


@router.post("/model/import", dependencies=require(Access.ADMIN))
async def model_import(request: Request, settings: SettingsDep, slot: SlotDep) -> dict[str, Any]:
    """Publish an exported bundle (verified first): seeds a cold start or rolls back."""
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

