"""The client and the picker together, as a Python router uses them: predict for every
candidate, pick (the composite fallback when predictions are unavailable), and build the
training rows to send back when the request completes."""

from __future__ import annotations

import random
from collections.abc import Sequence

from latency_client._client import PredictorClient
from latency_client._errors import PredictionUnavailable
from latency_client._headroom import prediction_row, prediction_rows
from latency_client._picker import Pick, PickerConfig, pick
from latency_client._types import PodState, Prediction, RequestInfo


async def choose_pod(
    client: PredictorClient,
    request: RequestInfo,
    pods: Sequence[PodState],
    rng: random.Random,
    config: PickerConfig | None = None,
    *,
    admission: bool = True,
) -> Pick:
    """One scheduling decision; never raises for a missing prediction."""
    try:
        predictions: list[Prediction] | None = await client.predict(prediction_rows(request, pods))
    except PredictionUnavailable:
        predictions = None  # the scorer falls back to its composite score
    return pick(request, pods, predictions, rng, config, admission=admission)


def completion_rows(
    request: RequestInfo,
    pod: PodState,
    prediction: Prediction | None,
    *,
    ttft_ms: float,
    e2e_ms: float | None = None,
    output_tokens: int = 0,
) -> list[dict[str, object]]:
    """The training rows of one completed request (picker.md section 7): a TTFT row with
    the features as predicted for the chosen pod and, for a streaming request with more
    than one output token, a TPOT row with (e2e - TTFT) / (output_tokens - 1). Both carry
    the prediction the pick acted on, for the trainer's live calibration."""
    features = prediction_row(request, pod)
    acted_on: dict[str, object] = (
        {}
        if prediction is None
        else {"predicted_ttft_ms": prediction.ttft_ms, "predicted_tpot_ms": prediction.tpot_ms}
    )
    rows: list[dict[str, object]] = [
        {**features, **acted_on, "actual_ttft_ms": ttft_ms, "actual_tpot_ms": 0.0}
    ]
    if request.streaming and e2e_ms is not None and output_tokens > 1:
        tpot_ms = max(0.0, (e2e_ms - ttft_ms) / (output_tokens - 1))
        rows.append(
            {
                **features,
                **acted_on,
                "num_tokens_generated": output_tokens,
                "actual_ttft_ms": 0.0,
                "actual_tpot_ms": tpot_ms,
            }
        )
    return rows
