"""The groups of rows a live factor of their own follows (shared.live_calibration): rows
of one P/D role ("prefill", "decode"), of one hardware class ("h200"), or of both
("decode/h200"). Monolithic rows of no class form no group (the pool's factor serves them).

A prefill pod's TTFT and a decode pod's are different quantities (a queue and a prefill
against a first decode step), as a slow class's latencies are not a fast one's: one factor
for the pool would land between them and cover neither. The name is built from the row's
labels, normalised, so the trainer (from stored labels) and every server (from the codes
in a prediction's columns) agree on it.
"""

from __future__ import annotations

from shared.features import POD_TYPE_CODES, normalized_pod_class, pod_class_code

SEPARATOR = "/"


def role_of(pod_type: str | None) -> str:
    """The P/D role of a row's pod_type ("" for monolithic and unknown roles, which
    serve prefill and decode on one pod, as shared.features codes them)."""
    role = (pod_type or "").strip().lower()
    return role if role in POD_TYPE_CODES else ""


def group_name(pod_type: str | None, pod_class: str | None) -> str:
    """ "decode/h200", "prefill", "h200", or "" (no group)."""
    return SEPARATOR.join(p for p in (role_of(pod_type), normalized_pod_class(pod_class)) if p)


def group_labels(name: str) -> tuple[str, str]:
    """(role, class) of a group name; a single part is a role when it names one."""
    first, sep, rest = name.partition(SEPARATOR)
    if sep:
        return first, rest
    return (first, "") if first in POD_TYPE_CODES else ("", first)


def group_codes(name: str) -> tuple[float, float]:
    """(pod_type_code, pod_class_code) of the rows of group `name`."""
    role, pod_class = group_labels(name)
    return POD_TYPE_CODES.get(role, 0.0), pod_class_code(pod_class)
