"""llm-d's legacy ttft.joblib / tpot.joblib, written on request (LATENCY_LEGACY_ARTIFACTS):
regressors (the files' models and bytes), files (which files the trainer writes, and when).
"""
