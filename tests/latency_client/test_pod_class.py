"""PodState.pod_class (ours): sent in the prediction and training rows when set, and absent
from them otherwise, so the client's bytes for llm-d-like usage are the ones it sent before."""

from __future__ import annotations

from latency_client import (
    PodState,
    Prediction,
    RequestInfo,
    completion_rows,
    prediction_row,
    prediction_rows,
)
from latency_client._strict import encode_rows

REQUEST = RequestInfo(input_token_length=300, encoder_input_size=2)
PLAIN = PodState(
    "a",
    kv_cache_percentage=0.25,
    num_request_waiting=1,
    running_requests=2,
    prefill_tokens_in_flight=40,
    prefix_cache_score=0.5,
    encoder_matched_size=1,
)
# What the client sent for PLAIN before pod_class, key for key in this order (llm-d's row).
BEFORE = (
    b'{"requests":[{"kv_cache_percentage":0.25,"input_token_length":300,'
    b'"num_request_waiting":1,"num_request_running":2,"num_tokens_generated":1,'
    b'"prefix_cache_score":0.5,"pod_type":"","prefill_tokens_in_flight":40,'
    b'"decode_tokens_in_flight":0,"encoder_matched_size":1,"encoder_input_size":2}]}'
)


def test_a_pod_without_a_class_sends_the_bytes_it_sent_before() -> None:
    assert PLAIN.pod_class == ""
    row = prediction_row(REQUEST, PLAIN)
    assert "pod_class" not in row
    assert encode_rows([row]) == BEFORE
    for training_row in completion_rows(
        REQUEST, PLAIN, Prediction(1.0, 2.0, "v"), ttft_ms=5.0, e2e_ms=50.0, output_tokens=3
    ):
        assert "pod_class" not in training_row


def test_a_pod_with_a_class_sends_it_in_every_row() -> None:
    b200 = PodState("b", pod_class="b200")
    rows = prediction_rows(REQUEST, [PLAIN, b200])
    assert "pod_class" not in rows[0] and rows[1]["pod_class"] == "b200"
    without_class = {k: v for k, v in rows[1].items() if k != "pod_class"}
    assert without_class == prediction_row(REQUEST, PodState("b"))  # the rest as before
    ttft_row, tpot_row = completion_rows(
        REQUEST, b200, None, ttft_ms=5.0, e2e_ms=50.0, output_tokens=3
    )
    assert ttft_row["pod_class"] == tpot_row["pod_class"] == "b200"
    assert b'"pod_class":"b200"' in encode_rows([ttft_row, tpot_row], key="entries")
