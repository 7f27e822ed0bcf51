"""The accuracy harness: replay the recorded traces, score the served p90s against a naive
running p90, judge the accuracy goals. The command is `python -m benchmarks.replay`
(`__main__.py` says how to call it); its parts, in the order a run goes through them:

- `cli`: arguments, one run per trace and mode, the JSON or the tables;
- `rows`: the trace's rows, and which target a row measures;
- `drift`: the rows of a drift replay (`--repeat`, `--drift`) and where they shift;
- `online`: the EPP's loop against real servers (`servers`: their environment and start);
- `inprocess`: the same protocol in one process, deterministic, for quick A/B;
- `offline`: the llm-d project's 90/10 protocol, over HTTP or in process, with
  `llmd_reference` (the llm-d model refitted on the same splits);
- `metrics`: model against naive (the running p90, and `naive_recent`: the p90 of the newest
  actuals), overall, per window, second half, mean over seeds;
- `drift_metrics`: after a drift replay's shift, coverage per 10 s and the first 120 s;
- `tables`, `goals`: the printed tables and the goals' verdicts with a reason per miss;
- `report`: goal tables from saved `--json` outputs (`python -m benchmarks.replay.report`);
- `level_bounds`: what a p90 of the recent level alone could save
  (`python -m benchmarks.replay.level_bounds`).
"""
