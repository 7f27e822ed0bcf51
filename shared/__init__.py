"""The contract both servers import: wire schemas, features, model bundles, settings."""

from shared.artifact import BundleError, Manifest, TargetManifest, write_bundle
from shared.decoding import decode_prediction_rows
from shared.features import Columns, build_matrix, columns_from_dicts, feature_names
from shared.predictor import LoadedBundle, load_bundle, load_current_bundle, prior_bundle
from shared.settings import ModelType, ObjectiveType, PredictionSettings, TrainingSettings
from shared.targets import TARGETS, Target

__all__ = [
    "TARGETS",
    "BundleError",
    "Columns",
    "LoadedBundle",
    "Manifest",
    "ModelType",
    "ObjectiveType",
    "PredictionSettings",
    "Target",
    "TargetManifest",
    "TrainingSettings",
    "build_matrix",
    "columns_from_dicts",
    "decode_prediction_rows",
    "feature_names",
    "load_bundle",
    "load_current_bundle",
    "prior_bundle",
    "write_bundle",
]
