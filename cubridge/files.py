"""Files written whole or not at all."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def plain_mode(directory: bool = False) -> int:
    """The permission bits a new file (`open(path, "w")`) or directory (`mkdir`) gets under the current umask;
    `tempfile` makes its files and directories private instead."""
    umask = os.umask(0)
    os.umask(umask)
    return (0o777 if directory else 0o666) & ~umask


def _mode_for(path: Path) -> int:
    """The permission bits a plain write to `path` leaves: an existing file's own, else a new file's."""
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return plain_mode()


def write_atomically(path: str | os.PathLike, data: str | bytes, make_directories: bool = False) -> None:
    """Write `data` through a temporary file in `path`'s directory (created first with `make_directories`),
    renamed into place: a reader sees the old file or the new one, never part of one. The file gets the
    permissions a plain write would give it. Raises OSError; leaves no temporary behind."""
    path = Path(path)
    if make_directories:
        path.parent.mkdir(parents=True, exist_ok=True)
    binary = isinstance(data, bytes)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb" if binary else "w", encoding=None if binary else "utf-8") as stream:
            os.fchmod(stream.fileno(), _mode_for(path))
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
