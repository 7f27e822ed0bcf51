"""The `latency-predictor` command and the tools around the servers: operator subcommands,
the local demo with its synthetic load, and starting/stopping the servers as processes
(`devkit.processes`, used by the demo, the tests and the benchmarks alike).

It imports the servers and `shared`; nothing imports it but tests, benchmarks and
`poolsim.predictor_servers` (only `processes`, which imports neither).
"""
