"""Prefill/decode roles read from the rows' pod_type: the P/D pool advise simulates, its
pods split by the load each role's rows imply (advisor.roles, advisor.pod_counts), and
pd-heuristic among the baselines; rows without roles keep the monolithic pool."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from advisor.options import Options
from advisor.profile import output_model
from advisor.roles import read_roles
from advisor.rows import StoreRows, read_rows
from advisor.verdict import compare
from tests.advisor.conftest import Stores
from tests.advisor.stores import advise
from tests.advisor.test_verdict import runs, simulation

QUICK = ("--sim-seconds", "60", "--speedup", "20", "--seeds", "0")
NO_PREDICTOR = ("--policies", "token-load,oracle")  # fast: no server in the loop


def options(pods: int, roles: tuple[tuple[str, int], ...] = ()) -> Options:
    return Options(
        url="sqlite:///x.db",
        pods=pods,
        hours=6.0,
        slos=(None, None),
        seeds=(0,),
        policies=("token-load",),
        hardware="h200",
        sim_seconds=None,
        speedup=None,
        fit_rows=240,
        roles=roles,
    )


def hand_rows(prefill_ttft_ms: float, decode_tpot_ms: float) -> StoreRows:
    """200 requests over 100 s, each a TTFT row from a prefill pod and a TPOT row of 101
    tokens from a decode pod, every row seeing no other request in flight."""
    n = 400
    ttft = np.arange(n) % 2 == 0
    return StoreRows(
        timestamp_s=np.arange(n) * 100.0 / (n - 1),
        input_tokens=np.full(n, 500.0),
        tokens_generated=np.where(ttft, 1.0, 101.0),
        waiting=np.zeros(n),
        running=np.zeros(n),
        kv_cache=np.zeros(n),
        prefix_score=np.zeros(n),
        prefill_in_flight=np.zeros(n),
        ttft_ms=np.where(ttft, prefill_ttft_ms, 0.0),
        tpot_ms=np.where(ttft, 0.0, decode_tpot_ms),
        pod_type=np.where(ttft, "prefill", "decode").astype(object),
    )


def test_the_roles_are_split_by_the_load_their_rows_imply() -> None:
    """A prefill pod busy 200 ms per request, a decode pod 100 x 20 ms: ten times more
    decode time, so 11 pods are 1 prefill and 10 decode (not the rows' 1:1 shares)."""
    rows = hand_rows(200.0, 20.0)
    pool = read_roles(rows, options(11), output_model(rows))
    assert pool is not None and pool.split == "load"
    assert (pool.prefill, pool.decode) == (1, 10)
    assert pool.load_pods is not None
    # 200 requests x 0.2 s over 100 s = 0.4 prefill pods; x 2 s = 4 decode pods
    assert np.allclose(pool.load_pods, (200 * 0.2 / 100.0, 200 * 2.0 / 100.0), rtol=0.02)
    flipped = read_roles(rows := hand_rows(2000.0, 2.0), options(11), output_model(rows))
    assert flipped is not None and (flipped.prefill, flipped.decode) == (10, 1)


def test_one_role_or_none_is_monolithic_and_roles_override() -> None:
    rows = hand_rows(200.0, 20.0)
    for kept in (None, np.full(len(rows), "decode", dtype=object)):
        one = replace(rows, pod_type=kept)
        assert read_roles(one, options(4), output_model(one)) is None
    asked = read_roles(rows, options(4, (("prefill", 3), ("decode", 1))), output_model(rows))
    assert asked is not None and (asked.prefill, asked.decode, asked.split) == (3, 1, "roles")


def test_pd_heuristic_is_a_baseline_of_the_verdict() -> None:
    sim = simulation(
        runs("pd-heuristic", [100, 101, 102]),
        runs("token-load", [120, 121, 122]),
        runs("latency-first", [80, 81, 82]),
    )
    comparison = compare(sim, "ttft_p90")
    assert comparison is not None and comparison.baseline == "pd-heuristic"


def test_a_pd_store_is_simulated_as_a_pd_pool(pd_store: str, tmp_path: Path) -> None:
    """Rows of 1 prefill and 3 decode pods: advise reads their pod_type, splits 4 pods
    1:3 by the rows' load (halving would give 2:2) and runs pd-heuristic first."""
    rows = read_rows(pd_store, 6.0)
    assert set(rows.roles().tolist()) == {"prefill", "decode"}
    out = tmp_path / "advice.json"
    done = advise("--db", pd_store, "--pods", "4", *QUICK, *NO_PREDICTOR, "--json", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    roles = document["roles"]
    assert (roles["prefill"], roles["decode"], roles["split"]) == (1, 3, "load")
    computed = read_roles(rows, options(4), output_model(rows))
    assert computed is not None and roles["load_pods"] == list(computed.load_pods or ())
    assert list(document["policies"]) == ["pd-heuristic", "token-load", "oracle"]
    # one request per TTFT row, whichever pod sent it: no double count
    assert document["profile"]["request_rows"] == int(rows.measures_ttft.sum())
    seed = document["policies"]["pd-heuristic"]["seeds"][0]
    assert [r["role"] for r in seed["by_role"]] == ["prefill", "decode"]
    assert seed["by_role"][0]["pods"] == 1 and seed["by_role"][1]["tpot_p90_ms"] > 0
    assert "roles     P/D pool prefill:1,decode:3" in done.stdout
    assert "split when the decode pod lacks >= 16 prompt tokens" in done.stdout
    # the monolithic pod-model check is shown, not judged, on P/D rows
    assert document["fit_error"]["cells"] and "shown, not judged" in done.stdout
    assert not any("pod model" in r for r in document["confidence_reasons"])


def test_roles_flag_overrides_the_split(pd_store: str, tmp_path: Path) -> None:
    out = tmp_path / "advice.json"
    args = ("--roles", "prefill:2,decode:2", "--pd-threshold", "64", "--json", str(out))
    done = advise("--db", pd_store, *QUICK, *NO_PREDICTOR, *args)
    assert done.returncode == 0, done.stderr
    roles = json.loads(out.read_text())["roles"]
    assert (roles["prefill"], roles["decode"], roles["split"]) == (2, 2, "roles")
    assert roles["threshold"] == 64
    bad = advise("--db", pd_store, "--pods", "3", "--roles", "prefill:2,decode:2")
    assert bad.returncode == 2 and "--pods is 3" in bad.stderr


def test_a_store_without_roles_is_unchanged(sqlite_stores: Stores, tmp_path: Path) -> None:
    out = tmp_path / "advice.json"
    args = ("--db", sqlite_stores.adequate, "--pods", "2", *QUICK, *NO_PREDICTOR)
    done = advise(*args, "--json", str(out))
    assert done.returncode == 0, done.stderr
    document = json.loads(out.read_text())
    assert document["roles"] is None and list(document["policies"]) == ["token-load", "oracle"]
    assert document["policies"]["token-load"]["seeds"][0]["by_role"] == []
    assert "roles     " not in done.stdout
