"""The cold-start prior's documented terms are the formula it answers with."""

from __future__ import annotations

import numpy as np
import pytest

from devkit.synthetic import synthetic_rows
from shared.decoding import decode_prediction_rows
from shared.features import FEATURES, feature_names
from shared.prior import PRIOR_INTERCEPTS, PRIOR_WEIGHTS, prior_importances, prior_predict
from shared.targets import TARGETS, Target


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.value)
def test_the_weights_reproduce_the_formula(target: Target) -> None:
    """/metrics reports PRIOR_WEIGHTS as the prior's importances: they must be its terms."""
    columns = decode_prediction_rows(synthetic_rows(500, seed=2))
    columns["num_request_waiting"] = np.arange(500, dtype=np.float64) % 7  # queues too
    rebuilt = PRIOR_INTERCEPTS[target] + sum(
        weight * FEATURES[name](columns) for name, weight in PRIOR_WEIGHTS[target].items()
    )
    np.testing.assert_allclose(prior_predict(target, columns), rebuilt, rtol=1e-12)
    assert np.ptp(prior_predict(target, columns)) > 0


def test_importances_cover_the_features_and_every_term() -> None:
    names = feature_names(Target.TTFT, token_in_flight=False)
    found = prior_importances(Target.TTFT, names)
    assert list(found)[: len(names)] == list(names)
    # the prior reads tokens in flight whatever the switch: its term is still reported
    assert found["prefill_tokens_in_flight"] == 0.1
    assert found["input_token_length"] == found["prefix_cache_score"] == 0.0
    assert prior_importances(Target.TPOT, ["is_queued"]) == {
        "is_queued": 0.0,
        "num_request_running": 0.5,
        "kv_cache_percentage": 20.0,
    }
