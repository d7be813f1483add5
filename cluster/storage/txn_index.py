"""The aborted-transaction index of one segment: ``<base offset>.txnindex``.

An append-only file of fixed-size big-endian entries, one per transaction whose
ABORT marker was written into the segment (KIP-98 / Kafka's TransactionIndex)::

    Version i16 (0) | ProducerId i64 | FirstOffset i64 | LastOffset i64 | LastStableOffset i64

34 bytes per entry. ``LastOffset`` is the offset of the abort marker;
``LastStableOffset`` is the partition's LSO once the transaction is complete (the first
offset of the oldest other open transaction, else ``LastOffset + 1``), which is what
lets a fetch stop scanning early. Entries are appended in marker order, so
``LastOffset`` strictly increases along the file.

The file is created lazily by the first entry. A torn tail (a crash in the middle of
an entry) is cut off when the file is loaded; an entry lost to a crash between the
marker append and the index append is restored by the partition's replay of the log.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

from .checkpoint import write_atomic

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size  # 34
VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return ENTRY.pack(
            VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset
        )


class TransactionIndex:
    """The aborted transactions completed in one segment, mirrored in memory."""

    def __init__(self, path: Path, base_offset: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.entries: list[AbortedTxn] = []
        self._fd: int | None = None
        self._load()

    def __len__(self) -> int:
        return len(self.entries)

    @property
    def last_offset(self) -> int | None:
        """The marker offset of the newest entry, if any."""
        return self.entries[-1].last_offset if self.entries else None

    def _load(self) -> None:
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return
        good = 0
        for version, pid, first, last, lso in ENTRY.iter_unpack(
            data[: len(data) - len(data) % ENTRY_SIZE]
        ):
            prev = self.entries[-1].last_offset if self.entries else None
            if version != VERSION or first > last or (prev is not None and last <= prev):
                break
            self.entries.append(AbortedTxn(pid, first, last, lso))
            good += ENTRY_SIZE
        if good != len(data):
            self._rewrite()  # drop a torn or garbled tail

    # -- writing -----------------------------------------------------------------
    def append(self, entry: AbortedTxn) -> None:
        last = self.last_offset
        if last is not None and entry.last_offset <= last:
            raise ValueError(
                f"aborted transaction ending at {entry.last_offset} is not after the last "
                f"entry of {self.path.name} (ending at {last})"
            )
        if self._fd is None:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(self._fd, entry.encode())
        self.entries.append(entry)

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at/after ``offset`` (log truncation)."""
        keep = [e for e in self.entries if e.last_offset < offset]
        if len(keep) != len(self.entries):
            self.entries = keep
            self._rewrite()

    def _rewrite(self) -> None:
        self.close()
        if self.entries:
            write_atomic(self.path, b"".join(e.encode() for e in self.entries), sync=False)
        else:
            self.path.unlink(missing_ok=True)

    def flush(self) -> None:
        if self._fd is not None:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.entries = []
        self.path.unlink(missing_ok=True)

    # -- reading -----------------------------------------------------------------
    def collect(self, fetch_offset: int, upper_bound: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper_bound), and whether the scan is complete.

        KIP-98: read the entries in order, keep those whose range overlaps the fetched
        range, and stop at the first entry whose last stable offset reaches the end of
        the fetched range: every transaction touching the range is decided by then.
        """
        found = []
        for e in self.entries:
            if e.last_offset >= fetch_offset and e.first_offset < upper_bound:
                found.append(e)
            if e.last_stable_offset >= upper_bound:
                return found, True
        return found, False
