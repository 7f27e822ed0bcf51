"""Simulator invariants on one pod: work conserved, nothing lost or served twice, cache
hits only for shared prefixes, preemption under memory pressure."""

from __future__ import annotations

import random
from dataclasses import replace

from poolsim.engine import RunResult
from poolsim.request import Request
from poolsim.workloads import generate
from tests.poolsim.helpers import SMALL, requests, run

ROOMY = replace(SMALL, kv_blocks=400)


def assert_conserved(result: RunResult, reqs: list[Request]) -> None:
    """Every request served once; every KV token computed once, or again after a
    preemption threw it away (counted)."""
    assert not result.unfinished
    assert sorted(c.request.id for c in result.completions) == sorted(r.id for r in reqs)
    assert sorted(s.request.id for s in result.seqs) == sorted(r.id for r in reqs)
    for seq in result.seqs:
        req = seq.request
        assert seq.generated == req.output_tokens
        assert seq.computed == req.input_tokens + req.output_tokens - 1  # last token not fed
        put = seq.prefill_computed + seq.prefill_cached + seq.decoded
        assert put == seq.computed + seq.discarded
        if seq.preemptions == 0:
            assert seq.prefill_computed + seq.prefill_cached == req.input_tokens
            assert seq.decoded == req.output_tokens - 1
            assert seq.discarded == 0
    assert sum(p.prefill_tokens for p in result.pods) == sum(
        s.prefill_computed for s in result.seqs
    )
    assert sum(p.decode_tokens for p in result.pods) == sum(s.decoded for s in result.seqs)
    assert sum(p.recompute_tokens for p in result.pods) == sum(s.discarded for s in result.seqs)
    assert sum(p.preemptions for p in result.pods) == sum(s.preemptions for s in result.seqs)
    for pod in result.pods:
        assert pod.allocator.free_blocks() == pod.allocator.total  # every block back
        assert pod.prefill_pending_tokens == 0 and not pod.running and not pod.waiting


def test_every_token_prefilled_and_decoded_once_without_preemption() -> None:
    reqs = requests([(0.0, 700, 5), (0.0, 40, 30), (0.01, 300, 1), (0.5, 17, 2)])
    result = run(reqs, hw=ROOMY)
    pod = result.pods[0]
    assert pod.preemptions == 0
    assert pod.prefill_tokens == sum(r.input_tokens for r in reqs)
    # the first token comes from the prefill step, every other one from a decode step
    assert pod.decode_tokens == sum(r.output_tokens - 1 for r in reqs)
    assert_conserved(result, reqs)


def test_preemption_under_memory_pressure_recomputes_and_counts_it() -> None:
    # 64 blocks of 16 tokens = 1,024 tokens; six requests that grow to 300 tokens each
    reqs = requests([(0.0, 150, 150)] * 6)
    result = run(reqs)
    pod = result.pods[0]
    assert pod.preemptions > 0
    assert pod.recompute_tokens > 0
    assert_conserved(result, reqs)
    # all the KV work: each token once, plus what preemptions threw away
    needed = sum(r.input_tokens + r.output_tokens - 1 for r in reqs)
    assert pod.prefill_tokens + pod.decode_tokens == needed + pod.recompute_tokens


def test_no_preemption_when_memory_suffices() -> None:
    result = run(requests([(0.0, 150, 150)] * 2))
    assert result.pods[0].preemptions == 0


def test_conservation_on_a_random_load_with_shared_prefixes_and_preemptions() -> None:
    rng = random.Random(3)
    reqs = []
    for i in range(60):
        group = rng.choice([None, 0, 1])
        tokens = rng.randint(1, 400)
        reqs.append(
            Request(
                i,
                rng.uniform(0, 2),
                tokens,
                rng.randint(1, 200),
                group,
                min(tokens, 128) if group is not None else 0,
            )
        )
    result = run(reqs, pods=2)
    assert sum(p.preemptions for p in result.pods) > 0  # the case this test is about
    assert sum(c.prefix_hit_tokens for c in result.completions) > 0
    assert_conserved(result, reqs)


def test_cache_hits_only_for_shared_prefixes() -> None:
    private = requests([(t * 0.5, 320, 2) for t in range(6)])
    assert all(c.prefix_hit_tokens == 0 for c in run(private).completions)
    shared = requests([(t * 0.5, 320, 2) for t in range(6)], group=7, prefix=256)
    done = sorted(run(shared).completions, key=lambda c: c.request.id)
    assert done[0].prefix_hit_tokens == 0  # the first one computes the prefix
    assert all(c.prefix_hit_tokens == 256 for c in done[1:])  # 16 full blocks, then private


def test_other_groups_never_hit() -> None:
    reqs = [Request(i, i * 0.5, 320, 2, prefix_group=i, prefix_tokens=256) for i in range(5)]
    assert all(c.prefix_hit_tokens == 0 for c in run(reqs).completions)


def test_lru_evicts_the_least_recently_freed_prefix() -> None:
    # groups 0 and 1 (512 tokens = 32 blocks each) fill the 64 blocks; a third group
    # evicts group 0 (freed first), so group 1 still hits and group 0 misses
    reqs = [
        Request(0, 0.0, 512, 1, 0, 512),
        Request(1, 1.0, 512, 1, 1, 512),
        Request(2, 2.0, 512, 1, 2, 512),
        Request(3, 3.0, 512, 1, 1, 512),
        Request(4, 4.0, 512, 1, 0, 512),
    ]
    hits = {c.request.id: c.prefix_hit_tokens for c in run(reqs).completions}
    assert hits[1] == 0 and hits[2] == 0
    assert hits[3] == 511  # all cached: vLLM still computes the last token
    assert hits[4] == 0


def test_a_named_workload_is_conserved() -> None:
    reqs = generate("mixed", 2, 20.0, seed=5)
    result = run(reqs, pods=2, hw=replace(SMALL, kv_blocks=2000, max_num_seqs=64))
    assert_conserved(result, reqs)
    assert sum(p.requests_in for p in result.pods) == len(reqs)
