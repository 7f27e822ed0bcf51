"""poolsim: a discrete-event simulator of a pool of vLLM-like inference pods.

It answers "does routing on predicted latency beat the usual policies, on which traffic?"
before anything is deployed: every policy serves the same seeded requests on the same
simulated pods (`latency-predictor simulate`, README.md).

Modules, one job each: `request` (requests and completions), `hardware` (named classes and
the step-time roofline), `blocks` (KV blocks and the prefix cache), `sequence` and `pod`
(one pod's scheduler), `encoder` (a multimodal pod's vision encoder: its time per image
and its cache of encoded images), `engine` (the event loop), `pool_changes` (pods that
join the pool and classes that slow down during a run), `roles`, `disagg`, `kv_transfer`
and `metrics_pd` (prefill/decode disaggregated pools), `workloads` and `replay` (requests),
`policy_api` (what a policy sees and implements), `policies` and `oracle`, `predicted`
(llm-d's picker on our real predictor, closed loop; with `predictor_servers`, `model_age`
and `prediction_quality`), `metrics`, `report`, `progress`, `command`, and `calibrate`.

Calibration (run once, before any policy was compared; constants fixed after)
-----------------------------------------------------------------------------
`python -m poolsim.calibrate --fit` rebuilds, for each row of the two H200 traces
(benchmarks/traces/), the pod state the row records (queued prompts, decoding requests
holding the recorded KV share, a closed background that keeps the load at that level),
serves the row's request on it, and compares the simulated TTFT or TPOT with the recorded
one by medians per trace, target and prompt-length band (calibrate.py says exactly how).
The fit is a coordinate descent from a physical starting guess (`calibrate.START`): two
rounds over a coarse grid and one over a fine grid of the step-time constants, the token
budget per step, the KV capacity and the per-request overhead, minimising the squared log
ratio of the medians over bands with at least 10 rows ("all" counted twice), on a fixed
subsample of 90 rows per trace; `python -m poolsim.calibrate` then checks the result on
every row. The figures are in benchmarks/README.md ("poolsim: calibration").
"""
