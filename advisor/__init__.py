"""advisor: `latency-predictor advise`, "should I turn predicted-latency routing on?".

Reads a store's newest rows (read-only), profiles the traffic they record, checks how well
the simulator's pod model fits them, rebuilds a workload of the same shape, serves it under
the heuristics, the predictor policies (our real servers in the loop) and the oracle
(poolsim), and answers with a verdict, its reason, its confidence and the sidecars' cost.

Modules, one job each: `rows` (read the store), `profile` (distributions), `fit` (the pod
model against the rows), `classes` (the pool's hardware classes from the rows' pod_class),
`speeds` (a class's speed from its rows), `pod_counts` (pods per class and per P/D role),
`roles` (a prefill/decode pool from the rows' pod_type) and `role_report`, `workload`
(rebuild requests), `predictor` (our servers, warmed once for every paced run), `simulate`
(policies x seeds), `verdict` (the rule), `reason` (the verdict in words), `cost` (the
sidecars' footprint), `report` and `class_report` (screen and JSON), `plots`, `progress`,
`advise` (the steps in order), `options` (what was asked), `command` (argparse and exit
codes).
It imports poolsim, and of the servers only `training_server.tables` (the schema).
"""
