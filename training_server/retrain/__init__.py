"""The retrain loop, one module per step: loop (the thread) -> schedule (when) -> window (how
many rows) -> target (one target: candidates, select, fit, cross_conformal, evaluate) ->
publish (the bundle) -> record (the retrain's RetrainRecord, records.py); live_factor
corrects between bundles.
"""
