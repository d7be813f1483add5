"""A log directory that goes offline on its first I/O error, as Kafka's
LogDirFailureChannel takes a log dir offline: from then on every read and write of the
logs in it fails with :class:`LogDirOffline` (the broker answers KAFKA_STORAGE_ERROR)
until the node restarts and recovers it.

Why: an append that failed half-way (a full disk while the offset index is written, a
short write) leaves state on disk and in memory that no later append may build on. An
acknowledged append that follows a failed one can be cut off by recovery (it sits behind
the failed batch, or has the same offset), so nothing is appended after a failure: the
restart's recovery brings the directory back to the last complete batch.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


class LogDirOffline(OSError):
    """The log directory had an I/O error earlier: nothing is read or written in it."""


class LogDir:
    """The health of one directory of logs (shared by every log in it)."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self.failure: str | None = None

    @property
    def online(self) -> bool:
        return self.failure is None

    def check(self) -> None:
        """Raise :class:`LogDirOffline` when the directory has failed."""
        if self.failure is not None:
            raise LogDirOffline(f"log directory {self.path} is offline: {self.failure}")

    def fail(self, what: str, exc: BaseException) -> None:
        """Take the directory offline after ``exc`` while doing ``what`` (logged once)."""
        if self.failure is not None:
            return
        self.failure = f"{what}: {exc}"
        log.error(
            "log directory %s is offline (KAFKA_STORAGE_ERROR until the node restarts) after "
            "an I/O error while %s: %s",
            self.path,
            what,
            exc,
        )
