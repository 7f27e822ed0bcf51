"""Bundle archives: export a published version, import it elsewhere, refuse bad archives."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import random
import tarfile
from pathlib import Path

import numpy as np
import pytest

from devkit.synthetic import synthetic_rows
from shared.archive import METADATA, import_bundle, import_loaded, pack_bundle, pack_files
from shared.artifact import (
    MANIFEST,
    VERSIONS_DIR,
    BundleError,
    Manifest,
    bundle_dir_for,
    load_models,
    read_current_version,
    read_manifest,
    write_bundle,
)
from shared.decoding import decode_prediction_rows
from shared.predictor import load_bundle, load_current_bundle
from shared.settings import ModelType, ObjectiveType
from shared.targets import TARGETS
from tests.conftest import publish_trained_bundle
from tests.factories import make_tar

COLUMNS = decode_prediction_rows(synthetic_rows(32, seed=7))
SOURCE_VERSION = "20260601T000000.000000Z"
TARGET_VERSION = "20260501T000000.000000Z"


def bundle_members(model_dir: Path, version: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(bundle_dir_for(model_dir, version).iterdir())}


@pytest.fixture
def source(tmp_path: Path) -> tuple[Path, Manifest]:
    src = tmp_path / "source-models"
    src.mkdir()
    return src, publish_trained_bundle(
        src, ModelType.LIGHTGBM, ObjectiveType.QUANTILE, seed=3, version=SOURCE_VERSION
    )


@pytest.fixture
def serving(model_dir: Path) -> Path:
    """A model dir already serving TARGET_VERSION, as a prediction pod would be."""
    publish_trained_bundle(model_dir, seed=4, version=TARGET_VERSION)
    return model_dir


def test_pack_and_import_round_trip(source: tuple[Path, Manifest], serving: Path) -> None:
    src, manifest = source
    archive = pack_bundle(bundle_dir_for(src, manifest.version), {"exported_by": "test"})
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        names = set(tar.getnames())
    assert names == {MANIFEST, "ttft.txt", "tpot.txt", METADATA}

    assert import_bundle(serving, archive) == SOURCE_VERSION
    assert read_current_version(serving) == SOURCE_VERSION
    imported = bundle_dir_for(serving, SOURCE_VERSION)
    assert sorted(p.name for p in imported.iterdir()) == [MANIFEST, "tpot.txt", "ttft.txt"]
    assert sorted(p.name for p in (serving / VERSIONS_DIR).iterdir()) == [
        TARGET_VERSION,
        SOURCE_VERSION,
    ]
    original, copy = load_current_bundle(src), load_current_bundle(serving)
    assert original is not None and copy is not None
    assert copy.version == original.version and copy.model_type is ModelType.LIGHTGBM
    want, got = original.predict(COLUMNS), copy.predict(COLUMNS)
    for target in TARGETS:
        np.testing.assert_array_equal(got[target], want[target])
        assert np.ptp(got[target]) > 0


def test_importing_an_existing_version_republishes_it(
    source: tuple[Path, Manifest], serving: Path
) -> None:
    src, manifest = source
    archive = pack_bundle(bundle_dir_for(src, manifest.version), {})
    import_bundle(serving, archive)
    (serving / "CURRENT").write_text(f"{TARGET_VERSION}\n")
    assert import_bundle(serving, archive) == SOURCE_VERSION
    assert read_current_version(serving) == SOURCE_VERSION
    assert [p.name for p in (serving / VERSIONS_DIR).iterdir() if p.name.startswith(".")] == []


def _with_evil_member(members: dict[str, bytes]) -> bytes:
    return make_tar({**members, "../evil": b"owned"})


def _with_nested_member(members: dict[str, bytes]) -> bytes:
    return make_tar({**members, "sub/evil": b"owned"})


def _with_symlink(members: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            if name == "ttft.txt":
                link = tarfile.TarInfo(name)
                link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(link)
                continue
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def _without_manifest(members: dict[str, bytes]) -> bytes:
    return make_tar({k: v for k, v in members.items() if k != MANIFEST})


def _garbage(members: dict[str, bytes]) -> bytes:
    return b"this is not a tar.gz at all " * 20


def _gzip_of_garbage(members: dict[str, bytes]) -> bytes:
    return gzip.compress(b"\x01not a tar" * 300)


def _altered_model(members: dict[str, bytes]) -> bytes:
    data = bytearray(members["ttft.txt"])
    data[len(data) // 2] ^= 0x01
    return make_tar({**members, "ttft.txt": bytes(data)})


def _bad_manifest(members: dict[str, bytes]) -> bytes:
    return make_tar({**members, MANIFEST: b"{not json"})


def _unlisted_file(members: dict[str, bytes]) -> bytes:
    """A file the manifest does not list (a pickle an llm-d server would then download)."""
    return make_tar({**members, "ttft.joblib": b"not listed, not checksummed"})


REFUSED = {
    "parent-path": _with_evil_member,
    "nested-path": _with_nested_member,
    "symlink": _with_symlink,
    "no-manifest": _without_manifest,
    "garbage": _garbage,
    "gzip-not-tar": _gzip_of_garbage,
    "altered-model": _altered_model,
    "bad-manifest": _bad_manifest,
    "unlisted-file": _unlisted_file,
}


@pytest.mark.parametrize("case", REFUSED)
def test_bad_archive_is_refused_and_current_is_kept(
    source: tuple[Path, Manifest], serving: Path, tmp_path: Path, case: str
) -> None:
    src, manifest = source
    archive = REFUSED[case](bundle_members(src, manifest.version))
    with pytest.raises(BundleError):
        import_bundle(serving, archive)
    assert read_current_version(serving) == TARGET_VERSION
    bundle = load_current_bundle(serving)
    assert bundle is not None and bundle.version == TARGET_VERSION
    assert sorted(p.name for p in (serving / VERSIONS_DIR).iterdir()) == [TARGET_VERSION]
    assert not (serving / "evil").exists() and not (tmp_path / "evil").exists()
    assert not (serving / VERSIONS_DIR / "evil").exists()


def test_corrupted_compressed_stream_is_a_bundle_error(serving: Path) -> None:
    """Regression: a broken deflate stream once escaped import_bundle as zlib.error."""
    rng = random.Random(0)
    payload = "".join(
        f'"{rng.random():.6f}": [{rng.randint(0, 999)}, "split"],\n' for _ in range(3000)
    ).encode()
    clean = make_tar({MANIFEST: payload})
    for fraction in (0.2, 0.3, 0.5):
        archive = bytearray(clean)
        archive[int(len(archive) * fraction)] ^= 0xFF
        with pytest.raises(BundleError):
            import_bundle(serving, bytes(archive))
    assert read_current_version(serving) == TARGET_VERSION


LEGACY = {"ttft.joblib": b"llm-d's TTFT pickle", "tpot.joblib": b"llm-d's TPOT pickle"}


def legacy_bundle(model_dir: Path) -> Manifest:
    """A real trained bundle, published again as a new version with legacy files beside it."""
    manifest = publish_trained_bundle(model_dir, seed=5, version=SOURCE_VERSION)
    folder = bundle_dir_for(model_dir, manifest.version)
    models = load_models(folder, manifest)
    again = manifest.model_copy(deep=True, update={"version": "20260701T000000.000000Z"})
    write_bundle(model_dir, again, models, legacy_files=LEGACY)
    return again


def test_legacy_files_are_listed_checksummed_and_travel(tmp_path: Path, serving: Path) -> None:
    src = tmp_path / "legacy-source"
    src.mkdir()
    manifest = legacy_bundle(src)
    folder = bundle_dir_for(src, manifest.version)
    assert read_manifest(folder).legacy_files == {
        name: hashlib.sha256(data).hexdigest() for name, data in LEGACY.items()
    }
    assert {name: (folder / name).read_bytes() for name in LEGACY} == LEGACY

    members = bundle_members(src, manifest.version)
    assert import_bundle(serving, make_tar(members)) == manifest.version
    imported = bundle_dir_for(serving, manifest.version)
    assert {name: (imported / name).read_bytes() for name in LEGACY} == LEGACY

    for broken in (
        {**members, "ttft.joblib": b"swapped"},
        {k: v for k, v in members.items() if k != "tpot.joblib"},
    ):
        other = tmp_path / f"other-{len(broken)}"
        other.mkdir()
        with pytest.raises(BundleError, match=r"(checksum mismatch for|missing legacy file)"):
            import_bundle(other, make_tar(broken))
        assert read_current_version(other) is None


def test_a_manifest_without_legacy_files_reads_as_before(source: tuple[Path, Manifest]) -> None:
    """Bundles written without the flag keep the manifest older readers accept."""
    src, manifest = source
    raw = json.loads((bundle_dir_for(src, manifest.version) / MANIFEST).read_text())
    assert "legacy_files" not in raw


def test_a_cold_start_archive_is_refused_with_its_reason(serving: Path) -> None:
    archive = pack_files([], {"model_version": "cold-start-prior", "cold_start": True})
    with pytest.raises(BundleError, match="a cold-start export holds no trained model"):
        import_bundle(serving, archive)
    with pytest.raises(BundleError, match=f"archive has no {MANIFEST}"):
        import_bundle(serving, pack_files([], {"cold_start": "not a boolean"}))
    assert read_current_version(serving) == TARGET_VERSION


@pytest.mark.parametrize("model_type", [ModelType.XGBOOST, ModelType.LIGHTGBM])
def test_an_import_hands_back_the_bundle_it_verified_ready_to_serve(
    tmp_path: Path, serving: Path, model_type: ModelType
) -> None:
    src = tmp_path / "trainer"
    src.mkdir()
    manifest = publish_trained_bundle(src, model_type, seed=8, version=SOURCE_VERSION)
    archive = pack_bundle(bundle_dir_for(src, manifest.version), {})
    bundle = import_loaded(serving, archive)
    assert read_current_version(serving) == bundle.version == SOURCE_VERSION
    # the same answers as the published files read afresh, through the same walk
    fresh = load_bundle(serving, SOURCE_VERSION)
    assert bundle.compiled.keys() == fresh.compiled.keys() == set(TARGETS)
    want, got = fresh.predict(COLUMNS), bundle.predict(COLUMNS)
    for target in TARGETS:
        np.testing.assert_array_equal(got[target], want[target])
    with pytest.raises(BundleError):  # and verified like any import
        import_loaded(serving, archive[: len(archive) // 2])
    assert read_current_version(serving) == SOURCE_VERSION
