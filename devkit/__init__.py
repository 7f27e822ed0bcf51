"""What a local run and the tests share: our servers as child processes on loopback
(`processes`), and a seeded synthetic vLLM workload with models fitted on it
(`synthetic`). The `latency-predictor` demo, poolsim's closed loop, the benchmarks and the
tests import it; it imports only `shared`."""
