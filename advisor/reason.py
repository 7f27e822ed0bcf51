"""The verdict in words: what in the traffic and in the simulated runs decided it."""

from __future__ import annotations

from advisor.profile import Profile
from advisor.simulate import Simulation
from advisor.verdict import Comparison, Verdict, figure_range

WIDE_SIZES = 10.0  # p99 / p50 of prompt tokens from which sizes "vary" enough to matter
LITTLE_ROOM = 0.05  # the best heuristic within this of the oracle's TTFT p90
QUEUED_RARELY = 0.05


def traffic(profile: Profile) -> list[str]:
    sizes = profile.input_tokens
    words = [
        f"prompt sizes vary {sizes.p99_over_p50:.0f}x between p50 ({sizes.p50:,.0f}) and "
        f"p99 ({sizes.p99:,.0f} tokens; CV {sizes.cv:.2f})"
    ]
    load = profile.load
    if load.queued_share < QUEUED_RARELY:
        words.append(f"pods rarely queue (a request waiting in {load.queued_share:.0%} of rows)")
    else:
        words.append(
            f"pods had requests waiting in {load.queued_share:.0%} of rows "
            f"(p90 {load.waiting.p90:.0f} waiting; KV use p90 {load.kv_cache.p90:.0%})"
        )
    if profile.prefix.reused_share >= 0.1:
        words.append(
            f"{profile.prefix.reused_share:.0%} of requests found a cached prefix "
            f"(median score {profile.prefix.scores.p50:.2f})"
        )
    return words


def _ttft_words(c: Comparison) -> str:
    spread = max(c.baseline_range.spread, c.predictor_range.spread)
    base = f"{c.baseline} ({c.baseline_range.mean:,.0f} ms)"
    if c.win:
        return (
            f"{c.predictor} cuts TTFT p90 by {-c.change:.0%} against the best heuristic, "
            f"{base}, beyond the seeds' spread of {spread:,.0f} ms"
        )
    if c.change <= 0:
        return (
            f"{c.predictor} is only {-c.change:.1%} faster on TTFT p90 than {base}: under 5 % "
            f"or within the seeds' spread of {spread:,.0f} ms"
        )
    return f"{c.predictor} is {c.change:.1%} slower on TTFT p90 than {base}"


def _slo_words(c: Comparison) -> str:
    b, p = c.baseline_range, c.predictor_range
    verb = "raises" if c.win else "changes"
    return (
        f"{c.predictor} {verb} SLO attainment by {c.change * 100:+.1f} points against "
        f"{c.baseline} ({p.low:.1%}-{p.high:.1%} vs {b.low:.1%}-{b.high:.1%})"
    )


def _room(sim: Simulation, c: Comparison) -> str | None:
    oracle = sim.get("oracle")
    best = figure_range(oracle, "ttft_p90") if oracle else None
    if best is None or c.baseline_range.mean <= 0:
        return None
    room = 1.0 - best.mean / c.baseline_range.mean
    if room < LITTLE_ROOM:
        return (
            f"the best heuristic is already within {max(room, 0.0):.0%} of the oracle's "
            f"TTFT p90 ({best.mean:,.0f} ms): no policy has much to gain here"
        )
    return f"the oracle's TTFT p90 is {room:.0%} below the best heuristic's"


def _mechanism(profile: Profile, sim: Simulation, c: Comparison) -> str | None:
    """Why queue-length heuristics lose on wide sizes, when the runs show it."""
    if profile.input_tokens.p99_over_p50 < WIDE_SIZES or not c.baseline.startswith("token-load"):
        return None
    plain = [sim.get(name) for name in ("heuristic", "round-robin")]
    worst = [r for p in plain if p and (r := figure_range(p, "ttft_p90")) is not None]
    if not worst or max(r.mean for r in worst) < 1.1 * c.baseline_range.mean:
        return None
    return (
        "queue-length heuristics queue short prompts behind long ones; token-load counts "
        "the prompt tokens queued and avoids most of it"
    )


def explain(profile: Profile, verdict: Verdict, sim: Simulation | None) -> str:
    if verdict.answer == "not-enough-data":
        return (
            "; ".join(verdict.missing)
            + ". Let the EPP send more traffic (two rows per request) or widen --hours."
        )
    words = traffic(profile)
    if verdict.ttft is not None and sim is not None:
        words.append(_ttft_words(verdict.ttft))
        words += [w for w in (_mechanism(profile, sim, verdict.ttft),) if w]
        words += [w for w in (_room(sim, verdict.ttft),) if w]
    if verdict.slo is not None:
        words.append(_slo_words(verdict.slo))
    text = "; ".join(words)
    return text[0].upper() + text[1:] + "."
