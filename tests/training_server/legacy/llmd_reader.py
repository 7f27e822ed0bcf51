"""An old llm-d prediction server's side of the legacy model files, in its own process.

It joblib-loads ttft.joblib and tpot.joblib, as such a server does with what it downloads,
builds the feature frame from request rows the way docs/api.md section 5 gives it
(llm-d's column names, their order and dtypes: counts int64, fractions float64, the prefix
bucket and pod type as pandas categoricals, any unknown pod type missing), and prints
{"ttft": [ms, ...], "tpot": [ms, ...]}. Written from the spec, apart from the trainer's own
frame code, so the two are checked against each other. Only tests run it: the project never
loads a pickle.

usage: python llmd_reader.py FOLDER ROWS_JSON [--no-token-in-flight] [--no-encoder]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import joblib  # type: ignore[import-untyped]
import pandas as pd

IN_FLIGHT = ["prefill_tokens_in_flight", "decode_tokens_in_flight"]
ENCODER = ["encoder_matched_size", "encoder_input_size"]
QUEUE = [
    "is_queued",
    "kv_cache_percentage",
    "input_token_length",
    "num_request_waiting",
    "num_request_running",
]


def spec_columns(target: str, in_flight: bool, encoder: bool) -> list[str]:
    middle = IN_FLIGHT if in_flight else []
    if target == "tpot":
        return [*QUEUE, *middle, "num_tokens_generated", "pod_type_cat"]
    return [
        *QUEUE,
        *middle,
        *(ENCODER if encoder else []),
        "prefix_cache_score",
        "effective_input_tokens",
        "prefill_score_bucket",
        "pod_type_cat",
    ]


def spec_frame(rows: list[dict[str, Any]], target: str, in_flight: bool, encoder: bool) -> Any:
    table = pd.DataFrame(rows)
    for name in [*IN_FLIGHT, *ENCODER]:
        table[name] = table[name].astype("int64") if name in table else 0
    if "pod_type" not in table:
        table["pod_type"] = ""
    table["pod_type_cat"] = pd.Categorical(
        table["pod_type"].fillna(""), categories=["", "prefill", "decode"]
    )
    table["is_queued"] = (table["num_request_waiting"] > 0).astype("int64")
    prefix = table["prefix_cache_score"]
    table["effective_input_tokens"] = (1.0 - prefix) * table["input_token_length"]
    bucket = (prefix.clip(0.0, 1.0) * 4).astype("int64").clip(upper=3)
    table["prefill_score_bucket"] = pd.Categorical(bucket, categories=[0, 1, 2, 3], ordered=True)
    return table[spec_columns(target, in_flight, encoder)]


def main(argv: list[str]) -> None:
    folder, rows = Path(argv[0]), json.loads(Path(argv[1]).read_text())
    in_flight, encoder = "--no-token-in-flight" not in argv, "--no-encoder" not in argv
    answers = {}
    for target in ("ttft", "tpot"):
        model = joblib.load(folder / f"{target}.joblib")
        frame = spec_frame(rows, target, in_flight, encoder)
        answers[target] = [float(v) for v in model.predict(frame)]
    sys.stdout.write(json.dumps(answers))


if __name__ == "__main__":
    main(sys.argv[1:])
