"""Plain-text tables and figures for the `latency-predictor` subcommands."""

from __future__ import annotations

from collections.abc import Collection, Sequence


def align(rows: Sequence[Sequence[str]], right: Collection[int] = ()) -> str:
    """Columns padded to their widest cell, two spaces apart; the columns in `right` are
    right-aligned (numbers), the others left-aligned. No trailing blanks."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    )


def duration(seconds: float | None) -> str:
    """An age or a wait for people: "42s", "3m 07s", "5h 02m", "2d 4h"; "-" when unknown."""
    if seconds is None:
        return "-"
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def size(n: int) -> str:
    """Bytes for people: "812 B", "41.2 KiB", "3.5 MiB"."""
    if n < 1024:
        return f"{n} B"
    value, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{value:.1f} {unit}"
