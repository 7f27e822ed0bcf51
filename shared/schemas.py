"""Wire models for every route of the contract (docs/api.md).

Requests ignore unknown fields; responses may carry extra fields (we add `model_version`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum
from typing import Annotated, Any, ClassVar, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    model_validator,
)
from pydantic_core import InitErrorDetails, PydanticCustomError


class RowKind(Enum):
    """What a field of the request row holds. The row is declared once, as PredictionRequest
    below, each field's type carrying its kind: the strict decoder of the hot path
    (shared.decoding) and the feature columns (shared.features) are derived from it, so a
    field added there is decoded and becomes a column without a second list to keep."""

    FRACTION = "fraction"  # a number from 0 to 1 inclusive
    COUNT = "count"  # an integer from 0 to COUNT_MAX
    LABEL = "label"  # any string; null means ""


# Upper bound: the store keeps counts as 64-bit integers.
COUNT_MAX = 2**63 - 1
# The kind rides along as Annotated metadata: pydantic keeps it on the field and ignores it
# for validation and the JSON Schema.
Fraction = Annotated[float, Field(ge=0.0, le=1.0, allow_inf_nan=False), RowKind.FRACTION]
Count = Annotated[int, Field(ge=0, le=COUNT_MAX), RowKind.COUNT]
Millis = Annotated[float, Field(ge=0.0, allow_inf_nan=False)]


def _none_to_empty(value: Any) -> Any:
    return "" if value is None else value


# Any string is accepted: the EPP forwards raw role labels ("prefill-decode", "both", ...).
# null means "" (documented as string or null).
PodType = Annotated[
    str, BeforeValidator(_none_to_empty, json_schema_input_type=str | None), RowKind.LABEL
]
# Ours, not llm-d's: the pod's hardware class ("h200", "b200", ...), for pools that mix
# classes. Any string; absent or null means "" (no class), which is what llm-d's EPP sends.
PodClass = PodType


class _Request(BaseModel):
    model_config = ConfigDict(extra="ignore")


def _is_number(annotation: Any) -> bool:
    """int or float, bare, Annotated or in an Optional."""
    if annotation in (int, float):
        return True
    return any(_is_number(arg) for arg in get_args(annotation))


class _Row(_Request):
    """A request row: its numbers may arrive in pydantic's lax forms ("5", 5.0), but never as
    JSON booleans, which lax mode would take as 1 and 0 (a wrong type: 422 naming the field).
    One check per row, not a validator per field: ingestion validates 10,000 rows a call."""

    _numbers: ClassVar[tuple[str, ...]] = ()  # the int and float fields, set per subclass

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        cls._numbers = tuple(n for n, f in cls.model_fields.items() if _is_number(f.annotation))

    @model_validator(mode="before")
    @classmethod
    def _no_booleans(cls, data: Any) -> Any:
        # `bool in map(type, ...)` is one loop in C: the common row pays ~0.3 us for it.
        if isinstance(data, dict) and bool in map(type, data.values()):
            wrong = [n for n in cls._numbers if type(data.get(n)) is bool]
            if wrong:
                raise ValidationError.from_exception_data(
                    cls.__name__,
                    [
                        InitErrorDetails(
                            type=PydanticCustomError(
                                "number_type", "Input should be a number, not a boolean"
                            ),
                            loc=(name,),
                            input=data[name],
                        )
                        for name in wrong
                    ],
                )
        return data


# The request row's one declaration (see RowKind). No docstring: it would become the
# schema's description in the OpenAPI document.
class PredictionRequest(_Row):
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
    pod_class: PodClass = ""


@dataclass(frozen=True)
class RowField:
    name: str
    kind: RowKind
    required: bool
    default: Any  # None when required


def row_fields(model: type[BaseModel]) -> tuple[RowField, ...]:
    """The request row `model` declares, in declaration order. Every field must say its
    RowKind: one without could be neither decoded strictly nor made a column."""
    fields = []
    for name, info in model.model_fields.items():
        kinds = [m for m in info.metadata if isinstance(m, RowKind)]
        if len(kinds) != 1:
            raise TypeError(f"{model.__name__}.{name}: a row field's type must carry a RowKind")
        required = info.is_required()
        default = None if required else info.get_default(call_default_factory=True)
        fields.append(RowField(name, kinds[0], required, default))
    return tuple(fields)


REQUEST_ROW = row_fields(PredictionRequest)


class TrainingEntry(PredictionRequest):
    actual_ttft_ms: Millis
    actual_tpot_ms: Millis
    timestamp: datetime | None = None
    predicted_ttft_ms: Millis | None = None
    predicted_tpot_ms: Millis | None = None


class BulkTrainingEnvelope(_Request):
    """Only the envelope: entries are validated one by one so one bad row costs only itself.

    Documented as what the route accepts: any rows, at least one of them a valid
    TrainingEntry (JSON Schema `contains`); a call with no valid row answers 422."""

    entries: list[dict[str, Any]] = Field(
        min_length=1,
        json_schema_extra=lambda schema: schema.update(
            contains=TrainingEntry.model_json_schema(mode="validation")
        ),
    )


class BulkPredictionRequest(_Request):
    requests: list[PredictionRequest] = Field(min_length=1)


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
    """/predict/bulk: a valid row whose prediction failed (answered null)."""

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
    # Ours (docs/api.md, section 3): split nodes of the model that answered each target;
    # 0 for the cold-start prior and for a model without trees.
    ttft_model_splits: int = 0
    tpot_model_splits: int = 0


class FlushRequest(_Request):
    # Strict: on a route that deletes data, 0, "no" or "off" must not pass for a boolean.
    flush_training_data: StrictBool = True
    flush_test_data: StrictBool = True
    flush_metrics: StrictBool = True
    reason: str | None = None


class PredictionServerReport(BaseModel):
    """What a prediction server (each worker) tells the training server every model-sync
    interval (POST /prediction_servers/report): sent by prediction_server.fleet_report,
    validated by training_server.routes.fleet."""

    model_config = ConfigDict(extra="ignore")  # newer servers may say more

    id: str = Field(min_length=1, max_length=200, description="hostname/pid of the worker")
    model_version: str = Field(min_length=1, max_length=64)
    loaded_at: datetime | None = Field(None, description="when it swapped that version in")
    is_ready: StrictBool
    interval_s: float | None = Field(
        None, gt=0.0, le=86_400.0, description="how often it reports; sets when it is stale"
    )
