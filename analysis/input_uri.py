"""Where Spark's executors read a run's Parquet files.

The driver (this process) always reads the run directory itself: it validates the files and
reads the small ones (run.json, faults, final state).  The history and metrics, though, are read
by the executors, which on a cluster run on other machines: they read them from ``input_uri``
(a copy of the run directory on storage every executor reaches: ``hdfs://``, ``s3a://``, or a
shared mount's ``file://`` path), or else from the run directory's absolute ``file://`` URI, which
every executor reaches when the directory is on a mount shared at the same path.  A local master
reads the path as given.
"""

from __future__ import annotations

import re
from pathlib import Path

#: ``scheme://rest``: the URIs Hadoop's file systems take (file, hdfs, s3a, gs, abfs, ...)
_URI = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")


class InputUriError(ValueError):
    """An ``--input-uri`` that no file system could read (the message says what is expected)."""


def parse_input_uri(value: str) -> str:
    """``value`` as a directory URI without a trailing slash: a ``scheme://...`` URI as given, an
    absolute path as its ``file://`` URI; anything else raises :class:`InputUriError` (a relative
    path would be resolved by each executor against its own working directory)."""
    if _URI.fullmatch(value):
        return value.rstrip("/")
    if value.startswith("/"):
        return Path(value).as_uri().rstrip("/")
    raise InputUriError(
        f"{value!r} is not a URI every executor can read: give scheme://... "
        "(hdfs://, s3a://, file://) or an absolute path on a shared mount"
    )


def executor_path(run_dir: Path, file: Path, *, local: bool, input_uri: str | None = None) -> str:
    """The path or URI executors read ``file`` (inside ``run_dir``) at: under ``input_uri`` if
    given, else the file's absolute ``file://`` URI on a cluster, else ``file`` as given."""
    if input_uri is not None:
        return f"{parse_input_uri(input_uri)}/{file.relative_to(run_dir).as_posix()}"
    if local:
        return str(file)
    return file.resolve().as_uri()
