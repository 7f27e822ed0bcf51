"""Small builders shared by several test modules."""

from __future__ import annotations

import io
import tarfile


def make_tar(members: dict[str, bytes]) -> bytes:
    """A tar.gz holding `members` (name -> bytes) as plain files."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()
