"""`latency-predictor export` and `import`: model bundles as .tar.gz archives.

export downloads the training server's current bundle (`GET /model/export`). import
publishes one: uploaded to a training server (`POST /model/import`), or with --model-dir
verified and published straight into a model directory, which seeds a cold start with no
server running (the servers on that directory load it like any new version).
With --pool NAME both work on that pool: its routes under /pools/NAME on a server, its
directory <model-dir>/pools/NAME in a model directory.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import secrets
import sys
import tarfile
from pathlib import Path
from typing import Any

import httpx

from latency_cli.calls import (
    TRAINING_URL,
    CliError,
    add_pool_argument,
    answered,
    call,
    client,
    detail,
    http_url,
    reason,
    unreachable,
)
from latency_cli.table import size
from shared.pools import pool_model_dir, pool_url

TRAINING = "training server"
FALLBACK_NAME = "model-export.tar.gz"


def add_export_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--url", type=http_url, default=TRAINING_URL, help=f"training server ({TRAINING_URL})"
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        help="where to write it (default: the server's file name, here; "
        "a directory: that name in it)",
    )
    add_pool_argument(parser)


def add_import_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="a bundle archive from `export` ('-': stdin)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--url",
        type=http_url,
        default=TRAINING_URL,
        help=f"upload to this training server ({TRAINING_URL})",
    )
    where.add_argument(
        "--model-dir",
        metavar="DIR",
        type=Path,
        help="publish into this model directory instead, without any server",
    )
    parser.add_argument(
        "--keep",
        type=_at_least_one,
        default=5,
        metavar="N",
        help="with --model-dir: versions kept in the directory (5)",
    )
    add_pool_argument(parser, "its routes under /pools/NAME, or its folder DIR/pools/NAME")


def _at_least_one(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return number


# ---------------------------------------------------------------------------------- export


def run_export(args: argparse.Namespace) -> int:
    url = pool_url(args.url, args.pool)
    with client() as c:
        try:
            with c.stream("GET", f"{url}/model/export") as reply:
                if reply.status_code != 200:
                    reply.read()
                    if reply.status_code == 404:
                        raise CliError(
                            f"the {TRAINING} at {url} has no model to export: {detail(reply)}"
                        )
                    raise answered(reply, f"GET {url}/model/export")
                path = destination(args.output, reply.headers.get("content-disposition"))
                written = _save(reply, path, url)
        except httpx.HTTPError as exc:
            raise unreachable(TRAINING, url, exc) from None
    metadata = read_metadata(path)
    version = metadata.get("model_version") or "(version unknown)"
    print(f"exported model {version} to {path} ({size(written)})")
    return 0


def suggested_name(disposition: str | None) -> str:
    """The file name from Content-Disposition, reduced to a plain name in this directory."""
    found = re.search(r'filename="?([^";]+)"?', disposition or "")
    name = Path(found.group(1).strip()).name if found else ""
    return name if name and not name.startswith(".") else FALLBACK_NAME


def destination(output: str | None, disposition: str | None) -> Path:
    if output is None:
        return Path(suggested_name(disposition))
    path = Path(output)
    return path / suggested_name(disposition) if path.is_dir() else path


def _save(reply: httpx.Response, path: Path, url: str) -> int:
    """Stream into a temporary file beside `path`, then rename: never a partial archive."""
    temp = path.parent / f".{path.name}.{secrets.token_hex(4)}.part"
    try:  # 0o666 less the umask, as any file the user writes (mkstemp would make it 0o600)
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                for chunk in reply.iter_bytes():
                    out.write(chunk)
                    written += len(chunk)
            except httpx.HTTPError as exc:
                raise CliError(
                    f"the download from {url}/model/export broke off: {reason(exc)}"
                ) from None
        os.replace(temp, path)
    except OSError as exc:
        raise CliError(f"cannot write {path}: {exc.strerror or exc}") from None
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
    return written


def read_metadata(path: Path) -> dict[str, Any]:
    """metadata.json of an exported archive ({} if it has none or cannot be read)."""
    try:
        with tarfile.open(path, mode="r:gz") as tar:
            member = tar.extractfile("metadata.json")
            return json.load(member) if member else {}
    except (tarfile.TarError, OSError, KeyError, ValueError, EOFError):
        return {}


# ---------------------------------------------------------------------------------- import


def run_import(args: argparse.Namespace) -> int:
    archive = _read_archive(args.file)
    if args.model_dir is not None:
        # The pool's own directory, where the servers on this model directory look for it.
        model_dir = pool_model_dir(args.model_dir, args.pool)
        version = import_locally(model_dir, archive, keep=args.keep)
        print(
            f"imported model {version} into {model_dir}: published as the current "
            "version; servers on this directory load it at their next poll"
        )
        return 0
    url = pool_url(args.url, args.pool)
    with client() as c:
        reply = call(
            c,
            "POST",
            url,
            "/model/import",
            TRAINING,
            content=archive,
            headers={"Content-Type": "application/gzip"},
        )
    if reply.status_code == 422:
        raise CliError(detail(reply))  # "bundle refused: <why>"
    if reply.status_code != 200:
        raise answered(reply, f"POST {url}/model/import")
    version = reply.json().get("model_version")
    print(
        f"imported model {version} into the {TRAINING} at {url}: published as the current version"
    )
    return 0


def _read_archive(source: str) -> bytes:
    try:
        return sys.stdin.buffer.read() if source == "-" else Path(source).read_bytes()
    except OSError as exc:
        name = "standard input" if source == "-" else source
        raise CliError(f"cannot read {name}: {exc.strerror or exc}") from None


def import_locally(model_dir: Path, archive: bytes, *, keep: int) -> str:
    """Verify the bundle and publish it in `model_dir` (created if missing)."""
    from shared.archive import import_bundle
    from shared.artifact import BundleError

    try:
        return import_bundle(model_dir, archive, keep=keep)
    except BundleError as exc:
        raise CliError(f"bundle refused: {exc}") from None
    except OSError as exc:
        raise CliError(f"cannot import into {model_dir}: {exc.strerror or exc}") from None
