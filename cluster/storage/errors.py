"""Storage-layer exceptions."""

from __future__ import annotations


class StorageError(Exception):
    """Base class for log storage errors."""


class OffsetOutOfRange(StorageError):
    """The requested offset is outside [log_start_offset, log_end_offset]."""

    def __init__(self, offset: int, log_start_offset: int, log_end_offset: int) -> None:
        super().__init__(f"offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")
        self.offset = offset
        self.log_start_offset = log_start_offset
        self.log_end_offset = log_end_offset
