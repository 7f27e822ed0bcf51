"""Bundles that need a newer server: a manifest format above FORMAT_VERSION, or features this
code does not know, are refused as NeedsNewerServer naming what they need; a bundle that is
broken stays a plain BundleError."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from shared.artifact import (
    FORMAT_VERSION,
    MANIFEST,
    BundleError,
    NeedsNewerServer,
    bundle_dir_for,
)
from shared.predictor import load_current_bundle
from tests.conftest import publish_trained_bundle


def edit_manifest(model_dir: Path, version: str, edit: dict[str, Any]) -> None:
    """Change top-level manifest fields of a published bundle. The manifest lists the model
    files' sha256, not its own, so nothing needs re-checksumming."""
    path = bundle_dir_for(model_dir, version) / MANIFEST
    path.write_text(json.dumps({**json.loads(path.read_text()), **edit}))


def test_the_format_read_is_1() -> None:
    """A bump means every older prediction server refuses the new bundles: do it only for a
    change they cannot read (README, Rolling upgrades)."""
    assert FORMAT_VERSION == 1


@pytest.mark.parametrize(
    "edit",
    [
        {"format_version": 2},
        {"format_version": 2, "a_field_of_format_2": {"x": 1}},
        {"format_version": "2"},  # what the validation reads as 2
    ],
)
def test_a_newer_format_is_refused_naming_both_formats(
    model_dir: Path, edit: dict[str, Any]
) -> None:
    """Refused for its format even when it also holds fields this code does not know."""
    manifest = publish_trained_bundle(model_dir)
    edit_manifest(model_dir, manifest.version, edit)
    with pytest.raises(NeedsNewerServer) as caught:
        load_current_bundle(model_dir)
    assert str(caught.value) == (
        f"{manifest.version}: needs a prediction server that reads bundle format 2; "
        "this one reads up to 1"
    )
    assert (caught.value.version, caught.value.bundle_format) == (manifest.version, 2)


def test_the_current_format_and_older_manifests_load(model_dir: Path) -> None:
    manifest = publish_trained_bundle(model_dir)
    edit_manifest(model_dir, manifest.version, {"format_version": FORMAT_VERSION})
    assert load_current_bundle(model_dir) is not None
    path = bundle_dir_for(model_dir, manifest.version) / MANIFEST
    raw = json.loads(path.read_text())
    del raw["format_version"]  # the field's default: FORMAT_VERSION
    path.write_text(json.dumps(raw))
    assert load_current_bundle(model_dir) is not None


def test_an_unknown_feature_says_a_newer_server_is_needed(model_dir: Path) -> None:
    manifest = publish_trained_bundle(model_dir)
    path = bundle_dir_for(model_dir, manifest.version) / MANIFEST
    raw = json.loads(path.read_text())
    raw["targets"]["tpot"]["features"][-1] = "a_feature_of_a_newer_trainer"
    path.write_text(json.dumps(raw))
    with pytest.raises(NeedsNewerServer, match="unknown tpot features") as caught:
        load_current_bundle(model_dir)
    assert "needs a newer prediction server" in str(caught.value)
    assert "a_feature_of_a_newer_trainer" in str(caught.value)
    assert caught.value.bundle_format == FORMAT_VERSION


@pytest.mark.parametrize("format_version", ["two", 2.5, [2], None])
def test_a_format_that_is_not_a_whole_number_is_an_invalid_manifest(
    model_dir: Path, format_version: Any
) -> None:
    manifest = publish_trained_bundle(model_dir)
    edit_manifest(model_dir, manifest.version, {"format_version": format_version})
    with pytest.raises(BundleError) as caught:
        load_current_bundle(model_dir)
    assert not isinstance(caught.value, NeedsNewerServer)
    assert "invalid manifest" in str(caught.value)
