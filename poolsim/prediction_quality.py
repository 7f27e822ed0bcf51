"""How good were the p90s a predicted policy acted on: coverage and pinball loss (q = 0.9)
of the prediction for the chosen pod against what the request then measured, per target,
and how many requests the cold-start prior and the first models routed (warm-up)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from latency_client import Prediction

QUANTILE = 0.9
PRIOR_VERSION = "cold-start-prior"  # what our servers answer before a model exists
EARLY_MODELS = 3  # "early models": the first few trained on little data


def pinball(actual: float, predicted: float, quantile: float = QUANTILE) -> float:
    """The quantile loss: under-prediction costs q per ms, over-prediction 1 - q."""
    diff = actual - predicted
    return quantile * diff if diff >= 0 else (quantile - 1.0) * diff


@dataclass
class TargetScore:
    rows: int = 0
    covered: int = 0
    loss: float = 0.0

    def add(self, actual: float, predicted: float) -> None:
        self.rows += 1
        self.covered += actual <= predicted
        self.loss += pinball(actual, predicted)

    def figures(self, prefix: str) -> dict[str, float]:
        if not self.rows:
            return {f"{prefix}_rows": 0.0}
        return {
            f"{prefix}_rows": float(self.rows),
            f"{prefix}_coverage": self.covered / self.rows,
            f"{prefix}_pinball_ms": self.loss / self.rows,
        }


@dataclass
class ServedScores:
    """Filled as requests complete; `figures()` is the policy's summary part."""

    ttft: TargetScore = field(default_factory=TargetScore)
    tpot: TargetScore = field(default_factory=TargetScore)
    # the same after the first trained model answered (the prior's answers left out)
    ttft_trained: TargetScore = field(default_factory=TargetScore)
    tpot_trained: TargetScore = field(default_factory=TargetScore)
    versions: Counter[str] = field(default_factory=Counter)  # routed requests per version
    first_seen_s: dict[str, float] = field(default_factory=dict)  # version -> first pick
    age_sum_s: float = 0.0  # over trained picks: how long their version had been answering

    def routed(self, version: str, now_s: float) -> None:
        first = self.first_seen_s.setdefault(version, now_s)
        if version != PRIOR_VERSION:
            self.age_sum_s += now_s - first
        self.versions[version] += 1  # a Counter keeps first-seen order

    @property
    def first_model_s(self) -> float | None:
        """Simulated time of the first pick on a trained model."""
        trained = [t for v, t in self.first_seen_s.items() if v != PRIOR_VERSION]
        return min(trained) if trained else None

    def cadence(self) -> dict[str, float]:
        """Simulated seconds between new versions, and the mean age of the version each
        trained pick acted on (a 10 s retrain interval: about 5 s plus the loading)."""
        times = sorted(t for v, t in self.first_seen_s.items() if v != PRIOR_VERSION)
        picks = sum(n for v, n in self.versions.items() if v != PRIOR_VERSION)
        out = {"mean_model_age_s": self.age_sum_s / picks} if picks else {}
        if len(times) >= 2:
            out["retrain_cadence_s"] = (times[-1] - times[0]) / (len(times) - 1)
        return out

    def early_routed(self, models: int = EARLY_MODELS) -> int:
        """Requests routed by the first `models` trained versions."""
        trained = [count for version, count in self.versions.items() if version != PRIOR_VERSION]
        return sum(trained[:models])

    def completed(
        self,
        version: str,
        predicted: tuple[float, float],
        ttft_ms: float | None,
        tpot_ms: float | None,
    ) -> None:
        """`ttft_ms` / `tpot_ms` None: the prediction is not of that target (a P/D pool's
        decode pod of a split request predicts no TTFT, a prefill pod no TPOT)."""
        trained = version != PRIOR_VERSION
        if ttft_ms is not None:
            self.ttft.add(ttft_ms, predicted[0])
            if trained:
                self.ttft_trained.add(ttft_ms, predicted[0])
        if tpot_ms is not None:
            self.tpot.add(tpot_ms, predicted[1])
            if trained:
                self.tpot_trained.add(tpot_ms, predicted[1])

    def figures(self) -> dict[str, float]:
        out: dict[str, float] = {}
        out.update(self.ttft.figures("served_ttft"))
        out.update(self.tpot.figures("served_tpot"))
        out.update(self.ttft_trained.figures("trained_ttft"))
        out.update(self.tpot_trained.figures("trained_tpot"))
        out["routed_by_prior"] = float(self.versions[PRIOR_VERSION])
        out["routed_by_first_3_models"] = float(self.early_routed())
        out["model_versions_served"] = float(len(self.versions))
        if self.first_model_s is not None:
            out["first_model_at_s"] = self.first_model_s
        out.update(self.cadence())
        return out


@dataclass
class RoleScores:
    """A P/D pool's served p90s per role of the chosen pod: the prefill pod's TTFT against
    the request's TTFT, the decode pod's TPOT against its TPOT (and its TTFT for a request
    it served whole). Summary keys `served_ttft_coverage@ROLE`, `served_tpot_rows@ROLE`..."""

    ttft: dict[str, TargetScore] = field(default_factory=dict)
    tpot: dict[str, TargetScore] = field(default_factory=dict)

    def add(
        self, role: str, predicted: Prediction, ttft_ms: float | None, tpot_ms: float | None
    ) -> None:
        if ttft_ms is not None:
            self.ttft.setdefault(role, TargetScore()).add(ttft_ms, predicted.ttft_ms)
        if tpot_ms is not None:
            self.tpot.setdefault(role, TargetScore()).add(tpot_ms, predicted.tpot_ms)

    def figures(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for target, scores in (("ttft", self.ttft), ("tpot", self.tpot)):
            for role, score in sorted(scores.items()):
                for key, value in score.figures(f"served_{target}").items():
                    out[f"{key}@{role}"] = value
        return out
