"""python -m latency_cli: the same as the `latency-predictor` console script."""

from latency_cli.main import main

main()
