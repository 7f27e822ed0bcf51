"""Prediction server: hot-reloaded models answering TTFT/TPOT predictions."""
