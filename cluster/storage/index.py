"""Sparse on-disk indexes of one segment, mirrored in memory for bisection.

Both are append-only files of fixed-size big-endian entries:

- offset index (``.index``): relative offset i32 -> file position i32 of the batch
  that starts at that offset (base offsets, so a floor lookup lands on a batch at or
  before the target);
- time index (``.timeindex``): max timestamp so far i64 -> relative offset i32 of the
  first batch that reached it. Timestamps strictly increase along the file.

An index is a cache: when it is missing or fails the sanity checks it is rebuilt
from the log by the segment.
"""

from __future__ import annotations

import os
import struct
from array import array
from bisect import bisect_right
from pathlib import Path

from .checkpoint import write_atomic


class SparseIndex:
    """Entries (key, value) with strictly increasing keys, stored relative to a base."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.keys = array("q")
        self.values = array("q")
        self._fd: int | None = None

    def __len__(self) -> int:
        return len(self.keys)

    # -- encoding, specialised by subclasses -------------------------------------
    def _encode(self, key: int, value: int) -> bytes:
        raise NotImplementedError

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        raise NotImplementedError

    # -- persistence -------------------------------------------------------------
    def load(self) -> bool:
        """Read the file. False if it is missing or malformed (the caller rebuilds)."""
        self.keys = array("q")
        self.values = array("q")
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return False
        size = self.ENTRY.size
        if len(data) % size:
            return False
        for raw in self.ENTRY.iter_unpack(data):
            key, value = self._decode(raw)
            if self.keys and key <= self.keys[-1]:
                return False
            self.keys.append(key)
            self.values.append(value)
        return True

    def append(self, key: int, value: int) -> None:
        if self.keys and key <= self.keys[-1]:
            raise ValueError(f"index key {key} not above last key {self.keys[-1]}")
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._fd, self._encode(key, value))
        self.keys.append(key)
        self.values.append(value)

    def rewrite(self, entries: list[tuple[int, int]] | None = None) -> None:
        """Replace the file atomically with ``entries`` (default: the in-memory ones)."""
        self.close()
        if entries is not None:
            self.keys = array("q", (k for k, _ in entries))
            self.values = array("q", (v for _, v in entries))
        data = b"".join(self._encode(k, v) for k, v in zip(self.keys, self.values, strict=True))
        write_atomic(self.path, data, sync=False)

    def keep_first(self, count: int) -> None:
        """Drop all entries after the first ``count`` (used by truncation)."""
        if count < len(self.keys):
            del self.keys[count:]
            del self.values[count:]
            self.rewrite()

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)

    # -- lookups -----------------------------------------------------------------
    def floor(self, key: int) -> int:
        """Index of the last entry with entry key <= key, or -1."""
        return bisect_right(self.keys, key) - 1


class OffsetIndex(SparseIndex):
    """Absolute base offset -> file position."""

    ENTRY = struct.Struct(">ii")

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key - self.base_offset, value)

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return raw[0] + self.base_offset, raw[1]

    def lookup(self, offset: int) -> int:
        """File position of a batch starting at or before ``offset`` (0 if none indexed)."""
        i = self.floor(offset)
        return self.values[i] if i >= 0 else 0

    def sane(self, log_size: int) -> bool:
        """Offsets at/above the base and positions increasing inside the log file."""
        last_pos = -1
        for offset, pos in zip(self.keys, self.values, strict=True):
            if offset < self.base_offset or pos <= last_pos or pos >= log_size:
                return False
            last_pos = pos
        return True


class TimeIndex(SparseIndex):
    """Max timestamp so far -> absolute offset of the first batch that reached it."""

    ENTRY = struct.Struct(">qi")

    def _encode(self, key: int, value: int) -> bytes:
        return self.ENTRY.pack(key, value - self.base_offset)

    def _decode(self, raw: tuple[int, ...]) -> tuple[int, int]:
        return raw[0], raw[1] + self.base_offset

    def lookup(self, timestamp: int) -> int:
        """Offset to start a search for ``timestamp`` from (the base if none indexed)."""
        i = self.floor(timestamp)
        return self.values[i] if i >= 0 else self.base_offset

    @property
    def last(self) -> tuple[int, int] | None:
        return (self.keys[-1], self.values[-1]) if self.keys else None

    def sane(self, next_offset: int) -> bool:
        last = self.base_offset - 1
        for offset in self.values:
            if offset < last or offset >= next_offset:
                return False
            last = offset
        return True
