"""What one published bundle costs each process that handles it, by gzip level.

    .venv/bin/python -m benchmarks.bench_bundle_cost [--trees 100] [--rows 2000] [--repeat 20]

Trains a real bundle (XGBoost, `--trees` trees of depth 4 per target, as the trainer's
default candidate) and times, per bundle, over `--repeat` rounds on this process's CPU:
- pack: the archive the owner writes into the store for the other training replicas and
  every mirror's /model/export answers (shared.archive.pack_bundle), at gzip levels 9
  (tarfile's default), 6 and 1 (shared.archive.COMPRESS_LEVEL), and the archive's size;
- import: what a follower or a mirror does with it (unpack, verify, publish);
- load: what a server reading a shared directory does to serve it (verify, parse, compile
  the walk, probe);
- import and serve: a follower's or a mirror's whole cost, as an import then a load of the
  published files (as before), and as shared.archive.import_loaded, which serves the models
  its verification loaded.
Every figure in one run, so their ratios hold whatever the machine's speed that day.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.common import git_state, say
from devkit.synthetic import publish_trained_bundle
from shared import archive
from shared.artifact import bundle_dir_for
from shared.predictor import load_bundle


def per_call_ms(fn: Callable[[], Any], repeat: int) -> float:
    fn()  # warm: imports, caches
    start = time.process_time()
    for _ in range(repeat):
        fn()
    return (time.process_time() - start) / repeat * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trees", type=int, default=100)
    parser.add_argument("--rows", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-bundle-") as tmp:
        source = Path(tmp) / "trainer"
        manifest = publish_trained_bundle(source, rows=args.rows, n_estimators=args.trees)
        bundle = bundle_dir_for(source, manifest.version)
        size = sum(p.stat().st_size for p in bundle.iterdir())
        say(f"{git_state()}; bundle of 2 x {args.trees} trees, {size / 1000:.0f} KB of files")
        say("| gzip level | pack, ms CPU | archive, KB | import, ms CPU |")
        say("|---|---|---|---|")
        for level in (9, 6, archive.COMPRESS_LEVEL):
            data = archive.pack_bundle(bundle, {}, level=level)
            mirror = Path(tmp) / f"mirror-{level}"

            def imported(data: bytes = data, mirror: Path = mirror) -> None:
                archive.import_bundle(mirror, data, keep=2)
                (mirror / "CURRENT").unlink()  # the next round imports it again

            def packed(level: int = level) -> None:
                archive.pack_bundle(bundle, {}, level=level)

            pack = per_call_ms(packed, args.repeat)
            unpack = per_call_ms(imported, args.repeat)
            say(f"| {level} | {pack:.1f} | {len(data) / 1000:.0f} | {unpack:.1f} |")
        load = per_call_ms(lambda: load_bundle(source, manifest.version), args.repeat)
        say(f"load (verify, parse, compile, probe): {load:.1f} ms CPU per bundle")
        data, mirror = archive.pack_bundle(bundle, {}), Path(tmp) / "mirror"

        def then_load() -> None:
            load_bundle(mirror, archive.import_bundle(mirror, data, keep=2))
            (mirror / "CURRENT").unlink()

        def loaded() -> None:
            archive.import_loaded(mirror, data, keep=2)
            (mirror / "CURRENT").unlink()

        twice, once = per_call_ms(then_load, args.repeat), per_call_ms(loaded, args.repeat)
        say(
            f"import and serve: import then load {twice:.1f} ms CPU, import_loaded {once:.1f} ms "
            f"({once / twice:.2f}x)"
        )


if __name__ == "__main__":
    main()
