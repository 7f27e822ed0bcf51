"""The trainer scores what the prediction servers answer: a published bundle, loaded as a
prediction server loads it, answers the held-out rows exactly as the trainer's evaluation
computed them, so the metrics a bundle records are those of its served answers."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from devkit.synthetic import synthetic_rows
from shared.artifact import read_current_version
from shared.backends import Backend
from shared.features import Columns
from shared.predictor import load_bundle, prior_bundle
from shared.schemas import TrainingEntry
from shared.settings import ModelType, ObjectiveType
from shared.slot import BundleSlot, prior_slot
from shared.targets import TARGETS
from tests.conftest import training_settings
from training_server.metrics import TrainingMetrics
from training_server.retrain import scoring as evaluate_step
from training_server.retrain.fit import TargetFit
from training_server.retrain.retrainer import Retrainer
from training_server.retrain.scoring import Answers, evaluate
from training_server.store import SampleStore


@dataclass(frozen=True)
class Evaluated:
    """One call of the evaluation: the fit's features, the rows, what it computed."""

    features: tuple[str, ...]
    columns: Columns
    answers: Answers


def test_a_published_bundle_answers_what_the_evaluation_scored(
    tmp_path: Path,
    store: SampleStore,
    migrated_url: str,
    model_dir: Path,
    model_choice: tuple[ModelType, ObjectiveType],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model_type, objective = model_choice
    evaluated: list[Evaluated] = []
    real_answers = evaluate_step.answers

    def recording(backend: Backend, fit: TargetFit, columns: Columns) -> Answers:
        answered = real_answers(backend, fit, columns)
        evaluated.append(Evaluated(fit.features, columns, answered))
        return answered

    monkeypatch.setattr(evaluate_step, "answers", recording)
    settings = training_settings(
        tmp_path, migrated_url, model_dir=model_dir, model_type=model_type, objective_type=objective
    )
    store.add_samples([TrainingEntry.model_validate(r) for r in synthetic_rows(1500, seed=21)])
    assert Retrainer(settings, store, TrainingMetrics(), prior_slot(settings)).run_once() == "ok"

    # As a prediction server loads it (prediction_server.watcher): the version CURRENT names,
    # verified and compiled by load_bundle, served from its slot.
    version = read_current_version(model_dir)
    assert version is not None
    slot = BundleSlot(prior_bundle(model_type, objective, settings.quantile_alpha))
    slot.publish(load_bundle(model_dir, version))
    bundle, manifest = slot.serving, slot.serving.manifest
    assert manifest is not None and set(bundle.compiled) == set(TARGETS)
    assert any(bundle.compiled[t].leaves.shape[0] > 1 for t in TARGETS)  # trees, not a level

    assert len(evaluated) == len(TARGETS)
    for target in TARGETS:
        [call] = [e for e in evaluated if e.features == bundle.features[target]]
        served = bundle.predict(call.columns)[target]
        np.testing.assert_allclose(served, call.answers.served, rtol=1e-6)
        # The same rows as the store's held-out window, and its recorded metrics are those of
        # the served answers.
        columns, actual = store.window(target, test=True, limit=settings.max_test_data_size)
        assert all(np.array_equal(columns[n], call.columns[n]) for n in call.columns)
        recorded = manifest.targets[target].metrics
        scored = evaluate(actual, bundle.predict(columns)[target], settings.quantile_alpha)
        assert recorded["coverage"] == scored["coverage"]
        for name in ("mae", "rmse", "pinball_loss"):
            assert recorded[name] == pytest.approx(scored[name], rel=1e-6), name
