"""POST /predict on the training server, as the contract asks (handy for debugging): the
same answer as the prediction server's, from the bundle this replica serves. The batch
routes are the prediction servers' job."""

from __future__ import annotations

import time

from fastapi import APIRouter, Response

from shared.features import columns_from_dicts
from shared.schemas import PredictionRequest, PredictionResponse
from shared.web.json_body import JSONBodyRoute
from shared.wire import encode_prediction
from training_server.deps import PredictMetricsDep, ServingBundle

# JSONBodyRoute: a bad JSON body (NaN, 1e999, not UTF-8) answers the contract's 422.
router = APIRouter(tags=["predict"], route_class=JSONBodyRoute)


@router.post("/predict", response_model=PredictionResponse)
async def predict(
    row: PredictionRequest, bundle: ServingBundle, metrics: PredictMetricsDep
) -> Response:
    started = time.perf_counter()
    body = encode_prediction(bundle, bundle.predict(columns_from_dicts([row.model_dump()])))
    metrics.observe("predict", time.perf_counter() - started, 1)
    return Response(body, media_type="application/json")
