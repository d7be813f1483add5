"""A real full disk for tests: a small tmpfs mounted for the test (root only; CI runs as
root) and a filler file that takes every free page, so writes get ENOSPC from the kernel,
not from a mock. The mount is always undone, also when the test fails."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(path: Path, size: str = "1m") -> Iterator[Path]:
    """``path`` as the mount point of a tmpfs of ``size``; skips the test if it cannot
    be mounted (not root, no CAP_SYS_ADMIN)."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs at {path}: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(disk: Path) -> Path:
    """Take every free page of ``disk`` with a filler file (its path, to delete later)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        chunk = b"\0" * 4096
        while True:
            try:
                if os.write(fd, chunk) < len(chunk):
                    break
            except OSError:
                break
    finally:
        os.close(fd)
    return filler
