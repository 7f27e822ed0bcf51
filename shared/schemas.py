"""Wire models for every route of the contract (../shared/spec/api.md).

Requests ignore unknown fields; responses may carry extra fields (we add `model_version`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

Fraction = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False)]
# Upper bound: the store keeps counts as 64-bit integers.
COUNT_MAX = 2**63 - 1
Count = Annotated[int, Field(ge=0, le=COUNT_MAX)]
Millis = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


def _none_to_empty(value: Any) -> Any:
    return "" if value is None else value


# Any string is accepted: the EPP forwards raw role labels ("prefill-decode", "both", ...).
PodType = Annotated[str, BeforeValidator(_none_to_empty)]


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


class PredictionRequest(_Request):
    kv_cache_percentage: Fraction
    input_token_length: Count
    num_request_waiting: Count
    num_request_running: Count
    num_tokens_generated: Count
    prefix_cache_score: Fraction
    pod_type: PodType = ""
    prefill_tokens_in_flight: Count = 0
    decode_tokens_in_flight: Count = 0
    encoder_matched_size: Count = 0
    encoder_input_size: Count = 0


class TrainingEntry(PredictionRequest):
    actual_ttft_ms: Millis
    actual_tpot_ms: Millis
    timestamp: datetime | None = None
    predicted_ttft_ms: Millis | None = None
    predicted_tpot_ms: Millis | None = None


class BulkTrainingEnvelope(_Request):
    """Only the envelope: entries are validated one by one so one bad row costs only itself."""

    entries: list[dict[str, Any]] = Field(min_length=1)


class BulkPredictionRequest(_Request):
    requests: list[PredictionRequest] = Field(min_length=1)


class BulkPredictionEnvelope(_Request):
    requests: list[dict[str, Any]] = Field(min_length=1)


class PredictionResponse(BaseModel):
    ttft_ms: float
    tpot_ms: float
    predicted_at: datetime
    model_type: str
    objective_type: str
    quantile: float
    last_model_load: datetime | None
    model_version: str


class BulkPredictionError(BaseModel):
    index: int
    error: str
    request: Any


class BulkPredictionResponse(BaseModel):
    predictions: list[PredictionResponse | None]
    errors: list[BulkPredictionError] = []
    total_requests: int
    successful_predictions: int
    failed_predictions: int
    processing_time_ms: float
    model_version: str


class FlushRequest(_Request):
    flush_training_data: bool = True
    flush_test_data: bool = True
    flush_metrics: bool = True
    reason: str | None = None
