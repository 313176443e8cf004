"""Files written whole or not at all."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomically(path: str | os.PathLike, data: str | bytes, make_directories: bool = False) -> None:
    """Write `data` through a temporary file in `path`'s directory (created first with `make_directories`),
    renamed into place: a reader sees the old file or the new one, never part of one. Raises OSError; leaves
    no temporary behind."""
    path = Path(path)
    if make_directories:
        path.parent.mkdir(parents=True, exist_ok=True)
    binary = isinstance(data, bytes)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb" if binary else "w", encoding=None if binary else "utf-8") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
