"""The pool's hardware classes: read from the rows' `pod_class`, rebuilt for the simulation.

- Labels: each row's `pod_class`; a row without one counts as the `--hardware` class (with
  counts, their first class). Rows naming no class, or only that one, keep the pool as
  `--hardware` gives it, with its constants unscaled (as before classes were read).
- Otherwise the pool is rebuilt from the rows: each class starts from its constants in
  poolsim.hardware.HARDWARE (h200's for a label it does not know), scaled to agree with the
  class's own rows (advisor.speeds), and keeps its label as its name.
- Pods: `--pods` split over the classes by the load their rows imply (Little's law per
  class, advisor.pod_counts) when every class has rows enough to tell; else in proportion
  to their TTFT rows (at least one pod each, largest remainder; with fewer pods than
  classes the classes with the most rows get one each), with a note when the load implies
  another split; or as `--hardware CLASS:COUNT,...` says. The shares of the rows follow the
  router (one that favours a faster class sends it more than its share of the pods), so
  the load is the better witness of the pool. A class there that the rows do
  not show keeps its datasheet constants; a class of the rows it gives no pods shapes the
  traffic only. When the plan simulates fewer pods, they are split the same way.
- Policies: in a mixed pool `token-load-per-class` (token-load with each class's own peak
  prefill rate) joins the list after `token-load`; it reads that rate from HARDWARE by the
  pod's class name, so it is left out, with a note, when a label is not a class there.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

import numpy as np

from advisor.options import Options
from advisor.pod_counts import load_weights, split_pods
from advisor.profile import output_tokens, request_mask
from advisor.rows import StoreRows
from advisor.speeds import UNSCALED, Speeds, estimate, scaled
from poolsim.hardware import H200, HARDWARE, Hardware, hardware, pool_label
from poolsim.reconstruct import OutputModel

PER_CLASS_BASELINE = "token-load-per-class"
# "rows": --pods split by the classes' shares of the TTFT rows; "load": by the load the rows
# imply per class (advisor.pod_counts), taken when every class has one; "hardware": as the
# flag says
Split = Literal["rows", "load", "hardware"]


@dataclass(frozen=True)
class ClassSpeed:
    label: str  # the rows' pod_class (rows without one: the --hardware class)
    base: str  # the poolsim.hardware class its constants started from
    rows: int  # the class's rows
    request_rows: int  # of them, rows standing for one request (TTFT rows): its share
    pods: int  # of --pods
    sim_pods: int  # of the simulated pods
    speeds: Speeds  # read from its rows (UNSCALED when not rebuilt or without rows)
    hardware: Hardware  # the constants simulated
    load_pods: int | None = None  # of --pods, as the rows' load implies (advisor.pod_counts)


@dataclass(frozen=True)
class ClassPool:
    classes: tuple[ClassSpeed, ...]
    from_rows: bool  # the classes were read from the rows (False: --hardware as given)
    split: Split
    notes: tuple[str, ...]

    def pods(self, simulated: bool = True) -> list[Hardware]:
        """Each pod's class, class by class, as the Engine takes them."""
        return [
            c.hardware for c in self.classes for _ in range(c.sim_pods if simulated else c.pods)
        ]

    @property
    def label(self) -> str:
        return pool_label(self.pods(simulated=False))

    @property
    def mixed(self) -> bool:
        return len({c.label for c in self.classes if c.sim_pods > 0}) > 1

    @property
    def shown(self) -> bool:
        """Worth a report of its own: read from the rows, or a mixed pool."""
        return self.from_rows or self.mixed


def default_class(options: Options) -> str:
    """The class of rows without a pod_class: --hardware's (with counts, their first)."""
    return options.counts[0][0] if options.counts else options.hardware


def labels(rows: StoreRows, options: Options) -> np.ndarray:
    """Each row's class (see default_class)."""
    found = rows.classes()
    return np.where(found == "", default_class(options), found)


def _rebuilt(label: str, rows: StoreRows, outputs: OutputModel) -> tuple[str, Speeds, Hardware]:
    base = HARDWARE.get(label, H200)
    speeds = estimate(rows, base, outputs)
    return base.name, speeds, scaled(base, speeds, label)


def _wanted(options: Options, shares: dict[str, float], from_rows: bool) -> dict[str, int]:
    if options.counts:
        return dict(options.counts)
    if from_rows:
        return split_pods(shares, options.pods)
    return {next(iter(shares)): options.pods}


def read_classes(rows: StoreRows, options: Options, outputs: OutputModel) -> ClassPool:
    """The pool to simulate for `options.pods` pods (see the module docstring)."""
    default = default_class(options)
    named = labels(rows, options)
    requests = request_mask(rows)
    counted = {n: int((named == n).sum()) for n in set(named.tolist())} or {default: 0}
    found = sorted(counted, key=lambda n: (-counted[n], n))  # the most rows first
    from_rows = found != [default]
    wanted = _wanted(options, {n: float((requests & (named == n)).sum()) for n in found}, from_rows)
    order = [*wanted, *(n for n in found if n not in wanted)] if options.counts else found
    notes = []
    classes = []
    for label in order:  # wanted (the counts) is within it
        mine = named == label
        if from_rows and mine.any():
            base, speeds, hw = _rebuilt(label, rows.subset(mine), outputs)
        else:
            base, speeds, hw = label, UNSCALED, hardware(label)
            if from_rows:
                notes.append(f"{label}: no rows; its datasheet constants (poolsim.hardware)")
        pods = wanted.get(label, 0)
        if pods == 0:
            notes.append(
                f"{label}: {counted[label]:,} rows but no pods; they shape the traffic only"
            )
        classes.append(
            ClassSpeed(
                label, base, int(mine.sum()), int((requests & mine).sum()), pods, pods, speeds, hw
            )
        )
    split: Split = "rows" if from_rows and not options.counts else "hardware"
    pool = ClassPool(tuple(classes), from_rows, split, tuple(notes))
    return _checked_by_load(pool, rows, named, outputs) if split == "rows" else pool


def _checked_by_load(
    pool: ClassPool, rows: StoreRows, named: np.ndarray, outputs: OutputModel
) -> ClassPool:
    """The pods the rows' load implies beside the split (advisor.pod_counts), with a note
    when they differ: the rows' shares then follow the router, not the pool."""
    seen = output_tokens(rows)
    weights = load_weights(rows, named, float(seen.mean()) if len(seen) else outputs.median)
    if weights is None or len(weights) < 2:
        return pool
    pods = split_pods(weights, sum(c.pods for c in pool.classes))
    classes = tuple(replace(c, load_pods=pods.get(c.label)) for c in pool.classes)
    if all(c.load_pods == c.pods for c in classes):
        return replace(pool, classes=classes)
    implied = ",".join(f"{c.label}:{c.load_pods}" for c in classes if c.load_pods)
    if all(c.load_pods for c in classes if c.pods):
        # Every class the shares gave pods has a load estimate: take it, since the
        # shares follow the router (one that favours a faster class sends it more).
        moved = tuple(replace(c, pods=c.load_pods or 0, sim_pods=c.load_pods or 0) for c in classes)
        note = (
            f"pods from the rows' load (Little's law per class): {implied}; the shares of the "
            f"requests gave {pool.label}, which follow the router, not the pool"
        )
        return replace(pool, classes=moved, split="load", notes=(*pool.notes, note))
    note = (
        f"the rows' load implies {implied} (Little's law per class), where the shares of "
        f"the requests give {pool.label}: a router that favours a faster class sends it more "
        f"than its share of the pods; --hardware {implied} simulates that pool"
    )
    return replace(pool, classes=classes, notes=(*pool.notes, note))


def for_simulation(pool: ClassPool, sim_pods: int) -> ClassPool:
    """The same classes on `sim_pods` pods, split in proportion to their pods."""
    given = {c.label: float(c.pods) for c in pool.classes if c.pods > 0}
    counts = split_pods(given, sim_pods)
    return replace(
        pool, classes=tuple(replace(c, sim_pods=counts.get(c.label, 0)) for c in pool.classes)
    )


def policies_for(names: Sequence[str], pool: ClassPool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The policies to run on `pool`, and a note for any left out (see the docstring)."""
    chosen = list(names)
    if pool.mixed and "token-load" in chosen and PER_CLASS_BASELINE not in chosen:
        chosen.insert(chosen.index("token-load") + 1, PER_CLASS_BASELINE)
    unknown = sorted({c.label for c in pool.classes if c.sim_pods and c.label not in HARDWARE})
    if PER_CLASS_BASELINE in chosen and unknown:
        chosen.remove(PER_CLASS_BASELINE)
        return tuple(chosen), (
            f"{PER_CLASS_BASELINE} left out: it reads each class's peak prefill rate from "
            f"poolsim.hardware by name, which has no {', '.join(unknown)}",
        )
    return tuple(chosen), ()
