"""Training-server metrics: prometheus-client series plus the legacy llm-d lines."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from shared.backends import backend_for
from shared.features import feature_names
from shared.predictor import LoadedBundle
from shared.prior import prior_importances
from shared.settings import TrainingSettings
from shared.targets import TARGETS, Target
from training_server.retrain_record import RetrainRecord
from training_server.sample_counts import SampleCounts
from training_server.tables import RETRAIN_DETAILS, RETRAIN_METRICS


class TrainingMetrics:
    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        # In this order on /metrics: ingestion, retrains, then what this replica serves.
        self._ingestion_series(self.registry)
        self._retrain_series(self.registry)
        self._serving_series(self.registry)

    def _ingestion_series(self, r: CollectorRegistry) -> None:
        self.samples_accepted = Counter(
            "latency_samples_accepted", "Training rows durably stored", registry=r
        )
        self.samples_rejected = Counter(
            "latency_samples_rejected", "Training rows refused", ["reason"], registry=r
        )
        self.ingest_seconds = Histogram(
            "latency_ingest_duration_seconds",
            "Time to validate and commit one bulk ingestion call",
            buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
            registry=r,
        )
        self.store_samples = Gauge(
            "latency_store_samples", "Rows held in the store", ["split", "target"], registry=r
        )

    def _retrain_series(self, r: CollectorRegistry) -> None:
        self.retrains = Counter(
            "latency_retrains", "Retrain attempts by outcome", ["status"], registry=r
        )
        self.retrain_seconds = Histogram(
            "latency_retrain_duration_seconds",
            "Wall time of one successful retrain (both targets, evaluation and export)",
            buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 7.5, 10, 20, 30, 60),
            registry=r,
        )
        self.consecutive_failures = Gauge(
            "latency_retrain_consecutive_failures",
            "Failed retrains since the last success",
            registry=r,
        )
        self.retrain_metric = Gauge(
            "latency_retrain_metric",
            "Metric of the latest retrain: held-out (mae, rmse, "
            "pinball_loss, coverage, violation_rate, raw_coverage), the conformal factor "
            "(calibration_log_offset) and the served p90s since the previous retrain "
            "(live_coverage, live_pinball_loss)",
            ["target", "metric"],
            registry=r,
        )
        self.regime_coverage = Gauge(
            "latency_retrain_regime_coverage",
            "Held-out coverage of the latest retrain per "
            "regime (queued, pod_type=..., prefix_bucket=..., pod_class=...)",
            ["target", "regime"],
            registry=r,
        )
        self.window_limit = Gauge(
            "latency_training_window_limit",
            "Newest rows per target the next retrain may fit "
            "on (lowered when a retrain overruns half the interval)",
            registry=r,
        )

    def _serving_series(self, r: CollectorRegistry) -> None:
        self.is_leader = Gauge(
            "latency_trainer_is_leader",
            "1 while this training replica holds the retrain leadership, else 0",
            registry=r,
        )
        self.live_rows = Counter(
            "latency_live_scored_rows",
            "Served predictions scored against their actuals by the live calibration",
            ["target"],
            registry=r,
        )
        self.live_log_offset = Gauge(
            "latency_live_calibration_log_offset",
            "Live calibration log-factor served on top of each bundle's own (0 = none)",
            ["target"],
            registry=r,
        )
        self.live_group_log_offset = Gauge(
            "latency_live_calibration_group_log_offset",
            "Live calibration log-factor served to the rows of one group: a P/D role, a "
            "hardware class, or both (at most 16 groups)",
            ["target", "group"],
            registry=r,
        )
        self.live_shifts = Counter(
            "latency_live_shifts",
            "Shifts in the latency the live calibration found and followed (the factor set "
            "from the newest rows alone)",
            ["target"],
            registry=r,
        )
        self.live_blend_weight = Gauge(
            "latency_live_blend_weight",
            "The model's share of the served p90, blended with the p90 of the newest actuals "
            "(1 = the model alone)",
            ["target"],
            registry=r,
        )
        self.live_coverage = Gauge(
            "latency_live_coverage",
            "Share of the newest 1,000 scored actuals at or below the p90 the EPP was served",
            ["target"],
            registry=r,
        )
        self.model_choice = Gauge(
            "latency_model_choice",
            "1 for the candidate model the newest bundle serves per "
            "target (chosen by out-of-fold pinball loss), 0 for the others seen",
            ["target", "candidate"],
            registry=r,
        )
        self.model_published_at = Gauge(
            "latency_model_published_timestamp_seconds",
            "Unix time the current bundle was built",
            registry=r,
        )

    def observe_retrain(self, record: RetrainRecord) -> None:
        """The latest retrain's scores, one series per target and score (the metric label is
        the TargetRecord field's name), per regime, and per candidate."""
        for target in TARGETS:
            scores = record.target(target)
            for name in (*RETRAIN_METRICS, *RETRAIN_DETAILS):
                value = getattr(scores, name)
                if value is not None:
                    self.retrain_metric.labels(target.value, name).set(value)
        for target_value, regimes in (record.regimes or {}).items():
            for regime, scored in regimes.items():
                self.regime_coverage.labels(target_value, regime).set(scored["coverage"])
        for target_value, losses in (record.model_candidates or {}).items():
            chosen = record.target(Target(target_value)).model_choice
            for name in losses:
                self.model_choice.labels(target_value, name).set(1 if name == chosen else 0)

    def render(self, legacy_lines: list[str]) -> bytes:
        return ("\n".join(legacy_lines) + "\n").encode() + generate_latest(self.registry)


def served_importances(
    bundle: LoadedBundle | None, settings: TrainingSettings
) -> dict[str, dict[str, float]]:
    """Feature importances per target of what is served: the trees' gain for a trained
    model, else the cold-start prior's weights (shared.prior.prior_importances)."""
    out = {}
    for target in TARGETS:
        if bundle is not None and bundle.has_model(target):
            model = bundle.models[target]
            out[target.value] = backend_for(bundle.model_type).importances(
                model, bundle.features[target]
            )
        else:
            names = feature_names(
                target,
                token_in_flight=settings.enable_token_in_flight_features,
                encoder=settings.enable_encoder_features,
            )
            out[target.value] = prior_importances(target, names)
    return out


def legacy_lines(
    *,
    model_type: str,
    objective: str,
    quantile: float,
    counts: SampleCounts,
    last_ok: RetrainRecord | None,
    importances: dict[str, dict[str, float]],
) -> list[str]:
    """The label-less `{}` lines and names that existing llm-d tooling parses."""
    lines = [
        "# legacy llm-d latency predictor metrics",
        f'model_type{{type="{model_type}"}} 1',
        f'objective_type{{type="{objective}"}} 1',
        f"model_quantile{{}} {quantile}",
        "ensemble_active{} 0",
        "ensemble_mode{} 0",
    ]
    for target in TARGETS:
        t = target.value
        for split, label in ((counts.training, "train"), (counts.test, "test")):
            lines.append(
                f'training_samples_count{{model="{t}",split="{label}"}} {split.by_target[target]}'
            )
        for feature, value in importances.get(t, {}).items():
            lines.append(f'{t}_importance{{feature="{feature}"}} {value}')
        scores = last_ok.target(target) if last_ok else None
        if scores is None or scores.coverage is None or scores.violation_rate is None:
            continue  # (evaluate scores both, or neither)
        lines += [
            f"{t}_quantile_loss{{}} {scores.pinball_loss}",
            f"{t}_coverage_percent{{}} {100.0 * scores.coverage}",
            f"{t}_violation_rate_percent{{}} {100.0 * scores.violation_rate}",
            f"{t}_mae{{}} {scores.mae}",
            f"{t}_rmse{{}} {scores.rmse}",
        ]
    return lines
