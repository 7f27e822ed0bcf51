"""The retrain loop, one module per step: loop (the one thread, every pool) -> retrainer (one
pool's retrain: the steps in order) -> schedule (when) -> window (how many rows) -> target
(one target: candidates, select, fit, cross_conformal, scoring) -> publish (the bundle) ->
history (the retrain's record, training_server.retrain_record, into the store);
live_calibration corrects between bundles.
"""
