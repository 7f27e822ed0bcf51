"""What llm-d's router Helm chart gives each latency-predictor container (docs/llm-d-chart.md):
the default `trainingServer.config` and `predictionServers.config`, with the container's
volume mount point as `{volume}`. The chart-pod tests run our servers as processes with it,
and scripts/image-check runs the image with it."""

from __future__ import annotations

from pathlib import Path

TRAINING_CONFIG = {
    "LATENCY_RETRAINING_INTERVAL_SEC": "10",
    "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "100",
    "LATENCY_TTFT_MODEL_PATH": "{volume}/ttft.joblib",
    "LATENCY_TPOT_MODEL_PATH": "{volume}/tpot.joblib",
    "LATENCY_TTFT_SCALER_PATH": "{volume}/ttft_scaler.joblib",
    "LATENCY_TPOT_SCALER_PATH": "{volume}/tpot_scaler.joblib",
    "LATENCY_MODEL_TYPE": "xgboost",
    "LATENCY_MAX_TRAINING_DATA_SIZE_PER_BUCKET": "500",
    "LATENCY_OBJECTIVE_TYPE": "mean",
}
PREDICTION_CONFIG = {
    "LATENCY_MODEL_TYPE": "xgboost",
    "PREDICT_HOST": "0.0.0.0",
    "LOCAL_TTFT_MODEL_PATH": "{volume}/ttft.joblib",
    "LOCAL_TPOT_MODEL_PATH": "{volume}/tpot.joblib",
    "LOCAL_TTFT_SCALER_PATH": "{volume}/ttft_scaler.joblib",
    "LOCAL_TPOT_SCALER_PATH": "{volume}/tpot_scaler.joblib",
    "UVICORN_WORKERS": "28",
    "OMP_NUM_THREADS": "1",
    "MODEL_SYNC_INTERVAL_SEC": "30",
    "LATENCY_OBJECTIVE_TYPE": "mean",
}


def chart_config(config: dict[str, str], volume: Path | str) -> dict[str, str]:
    """`config` with the container's volume mount point in place of `{volume}`."""
    return {k: v.replace("{volume}", str(volume)) for k, v in config.items()}
