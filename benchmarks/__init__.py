"""Benchmarks: figures, never pass/fail (benchmarks/README.md has the commands and results).

- `bench_slice`, `bench_predict`, `bench_client` (+ `bare_calls`), `bench_load`, `soak`,
  `bench_store`, `bench_retrain`: the servers, the client and the store under measurement,
  one script each (`python -m benchmarks.NAME --help`);
- `bench_poolsim` (+ `poolsim_tables`, `poolsim_goals`) and `poolsim_why`: the simulated
  pool's capacity, policy comparison and diagnostics;
- `replay/`: the p90 accuracy harness (`python -m benchmarks.replay`);
- `common`: what the scripts share (printing, CPU pinning, RSS and CPU time, raw HTTP/1.1);
- `trace_files` and `traces/`: the recorded H200 traces and their loader.
"""
