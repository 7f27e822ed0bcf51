"""ClientConfig's checks, the URL forms PredictorClient takes, and the stats percentiles."""

from __future__ import annotations

import asyncio

import pytest

from latency_client import ClientConfig, PredictorClient, percentiles


def test_percentiles_are_nearest_rank() -> None:
    # 1..100: p50 is the 51st value (index int(0.5 * 100) = 50), p90 the 91st, p99 the 100th
    values = [float(v) for v in range(100, 0, -1)]
    assert percentiles(values) == {"p50": 51.0, "p90": 91.0, "p99": 100.0, "max": 100.0}
    assert percentiles([]) == {}


@pytest.mark.parametrize(
    "bad",
    [
        {"max_rows_per_caller": 0},
        {"max_rows_per_caller": 200, "max_rows_per_call": 100},
        {"max_in_flight": 0},
        {"max_buffered_rows": 0},
        {"window_s": -0.001},
        {"deadline_s": 0.0},
    ],
)
def test_config_refuses_settings_that_cannot_work(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        ClientConfig(**bad)  # type: ignore[arg-type]


def test_urls_as_a_list_or_as_the_epps_comma_separated_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def urls_of(client: PredictorClient) -> list[str]:
        await client.aclose()
        return [r.url for r in client.replicas.replicas]

    listed = PredictorClient(["http://a:8001/", "http://b:8002"])
    assert asyncio.run(urls_of(listed)) == ["http://a:8001", "http://b:8002"]
    monkeypatch.setenv("PREDICTION_SERVER_URL", "http://a:8001, http://b:8002,")
    monkeypatch.delenv("TRAINING_SERVER_URL", raising=False)
    assert asyncio.run(urls_of(PredictorClient.from_env())) == ["http://a:8001", "http://b:8002"]
