"""Small files written atomically: temp file, fsync, os.replace, fsync the directory."""

from __future__ import annotations

import os
from pathlib import Path

TMP_SUFFIX = ".tmp"


def write_atomic(path: Path, data: bytes, *, sync: bool = True) -> None:
    tmp = path.with_name(path.name + TMP_SUFFIX)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if sync:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_offset(path: Path, offset: int, *, sync: bool = True) -> None:
    """An offset checkpoint: a version line then the offset, as text."""
    write_atomic(path, f"0\n{offset}\n".encode(), sync=sync)


def read_offset(path: Path) -> int | None:
    """The offset in a checkpoint, or None if the file is missing or unreadable."""
    try:
        lines = path.read_text().split("\n")
    except (FileNotFoundError, UnicodeDecodeError):
        return None
    if len(lines) < 2 or lines[0] != "0":
        return None
    try:
        return int(lines[1])
    except ValueError:
        return None
