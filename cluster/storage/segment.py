"""One log segment: ``<base>.log`` plus its sparse ``.index`` and ``.timeindex``, and
the aborted-transaction index ``.txnindex`` (created by the first abort marker).

Appends go straight to the file descriptor with ``os.pwrite`` (no user-space
buffering), so a batch whose append returned survives a SIGKILL of the process.
"""

from __future__ import annotations

import contextlib
import os
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from ..protocol.record_batch import (
    CURRENT_MAGIC,
    HEADER_SIZE,
    INT32_MAX,
    LOG_OVERHEAD,
    BatchHeader,
    CorruptBatch,
    check_length,
    compute_crc,
    parse_header,
)
from .index import OffsetIndex, TimeIndex
from .txn_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIMEINDEX_SUFFIX = ".timeindex"
TXNINDEX_SUFFIX = ".txnindex"
HEADER_CHUNK = 64 * 1024
DATA_CHUNK = 1024 * 1024


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}"


@dataclass(frozen=True, slots=True)
class ScannedBatch:
    """A batch found in a segment: where it is and its header."""

    position: int
    header: BatchHeader


class LogSegment:
    """A contiguous run of batches starting at ``base_offset``."""

    def __init__(
        self, directory: Path, base_offset: int, index_interval_bytes: int, created_ms: int
    ) -> None:
        name = segment_name(base_offset)
        self.base_offset = base_offset
        self.log_path = directory / (name + LOG_SUFFIX)
        self.offset_index = OffsetIndex(directory / (name + INDEX_SUFFIX), base_offset)
        self.time_index = TimeIndex(directory / (name + TIMEINDEX_SUFFIX), base_offset)
        self.txn_index = TransactionIndex(directory / (name + TXNINDEX_SUFFIX), base_offset)
        self.index_interval_bytes = index_interval_bytes
        self.created_ms = created_ms
        self._fd: int | None = os.open(self.log_path, os.O_RDWR | os.O_CREAT, 0o644)
        self.size = os.fstat(self._fd).st_size
        if self.size == 0:
            # An empty segment holds no abort marker: the file is a leftover of an
            # earlier segment with this base offset.
            self.txn_index.delete()
        self.next_offset = base_offset  # one past the last offset held
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1  # base offset of the first batch with max_timestamp
        self._bytes_since_index = 0

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"

    @property
    def fd(self) -> int:
        if self._fd is None:
            raise ValueError(f"segment {self.log_path.name} is closed")
        return self._fd

    @property
    def is_empty(self) -> bool:
        return self.size == 0

    # -- scanning ----------------------------------------------------------------
    def iter_batches(
        self, start: int = 0, end: int | None = None, with_data: bool = False
    ) -> Iterator[tuple[int, BatchHeader, memoryview | None]]:
        """Yield (position, header, bytes or None) from ``start``; CorruptBatch on bad lengths."""
        end = self.size if end is None else end
        chunk = DATA_CHUNK if with_data else HEADER_CHUNK
        pos = start
        buf = b""
        buf_start = pos
        while pos < end:
            if end - pos < HEADER_SIZE:
                raise CorruptBatch(f"{end - pos} trailing bytes at position {pos}")
            rel = pos - buf_start
            if rel + HEADER_SIZE > len(buf):
                buf = os.pread(self.fd, min(chunk, end - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < HEADER_SIZE:
                    raise CorruptBatch(f"short read at position {pos}")
            header = parse_header(buf, rel)
            check_length(header, pos, end)
            data = None
            if with_data:
                if rel + header.size > len(buf):
                    buf = os.pread(self.fd, min(max(chunk, header.size), end - pos), pos)
                    buf_start, rel = pos, 0
                    if len(buf) < header.size:
                        raise CorruptBatch(f"short read at position {pos}")
                data = memoryview(buf)[rel : rel + header.size]
            yield pos, header, data
            pos += header.size

    def find(self, offset: int) -> ScannedBatch | None:
        """The first batch whose last offset is >= ``offset`` (it contains it, or follows)."""
        for pos, header, _ in self.iter_batches(self.offset_index.lookup(offset)):
            if header.last_offset >= offset:
                return ScannedBatch(pos, header)
        return None

    # -- loading and recovery ----------------------------------------------------
    def _track(self, pos: int, header: BatchHeader, write_index: bool) -> None:
        """Update end offset, max timestamp and the sparse indexes for a batch at ``pos``."""
        base_offset = header.base_offset
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = base_offset
        if self._bytes_since_index > self.index_interval_bytes:
            if write_index:
                self.offset_index.append(base_offset, pos)
            else:
                self.offset_index.keys.append(base_offset)
                self.offset_index.values.append(pos)
            self._maybe_append_time_entry(write_index)
            self._bytes_since_index = 0
        self._bytes_since_index += header.batch_length + LOG_OVERHEAD  # header.size
        self.next_offset = base_offset + header.last_offset_delta + 1  # header.next_offset

    def _maybe_append_time_entry(self, write: bool) -> None:
        last = self.time_index.last
        if self.max_timestamp >= 0 and (last is None or self.max_timestamp > last[0]):
            if write:
                self.time_index.append(self.max_timestamp, self.offset_of_max_timestamp)
            else:
                self.time_index.keys.append(self.max_timestamp)
                self.time_index.values.append(self.offset_of_max_timestamp)

    def _reset_state(self) -> None:
        self.next_offset = self.base_offset
        self.max_timestamp = -1
        self.offset_of_max_timestamp = -1
        self._bytes_since_index = 0
        self.offset_index.close()
        self.time_index.close()
        for index in (self.offset_index, self.time_index):
            index.keys = array("q")
            index.values = array("q")

    def recover(self, min_offset: int | None = None) -> int:
        """Validate every batch (length, magic, CRC, offset order), cut the file at the
        first bad one and rebuild both indexes. Returns the number of bytes truncated."""
        self._reset_state()
        expected = self.base_offset if min_offset is None else max(min_offset, self.base_offset)
        valid_end = 0
        try:
            for pos, header, data in self.iter_batches(with_data=True):
                assert data is not None
                if header.magic != CURRENT_MAGIC:
                    break
                if header.last_offset_delta < 0 or header.base_offset < expected:
                    break
                if header.last_offset - self.base_offset > INT32_MAX:
                    break
                if compute_crc(data, 0, header.size) != header.crc:
                    break
                self._track(pos, header, write_index=False)
                expected = header.next_offset
                valid_end = pos + header.size
        except CorruptBatch:
            pass
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
        self.offset_index.rewrite()
        self.time_index.rewrite()
        self.txn_index.truncate_to(self.next_offset)
        return truncated

    def load(self) -> bool:
        """Trust the indexes; scan only the tail after the last index entry (lengths only).

        Returns False if anything looks wrong; the caller then calls ``recover``.
        """
        self._reset_state()
        if self.size == 0:
            self.offset_index.rewrite([])  # nothing to index; drop any stale entries
            self.time_index.rewrite([])
            return True
        if not (self.offset_index.load() and self.time_index.load()):
            return False
        if not self.offset_index.sane(max(self.size, 1)):
            return False
        last_entry = self.time_index.last
        if last_entry is not None:
            self.max_timestamp, self.offset_of_max_timestamp = last_entry
        start = self.offset_index.values[-1] if len(self.offset_index) else 0
        try:
            for pos, header, _ in self.iter_batches(start):
                if header.base_offset < self.next_offset and pos != start:
                    return False
                if header.max_timestamp > self.max_timestamp:
                    self.max_timestamp = header.max_timestamp
                    self.offset_of_max_timestamp = header.base_offset
                self.next_offset = header.next_offset
                self._bytes_since_index = (
                    header.size if pos == start else self._bytes_since_index + header.size
                )
        except CorruptBatch:
            return False
        if self.size and self.next_offset <= self.base_offset:
            return False
        return self.time_index.sane(self.next_offset)

    # -- writing -----------------------------------------------------------------
    def append(
        self, data: bytes | bytearray | memoryview, header: BatchHeader, *, track: bool = True
    ) -> None:
        """Write one offset-assigned batch at the end of the file, then index it
        (``track=False``: the caller indexes what it wrote itself)."""
        pos = self.size
        fd = self.fd
        length = len(data)
        try:
            written = os.pwrite(fd, data, pos)  # a batch is usually written whole
            if written < length:
                view = memoryview(data)
                while written < length:
                    written += os.pwrite(fd, view[written:], pos + written)
            self.size = pos + length
            if track:
                self._track(pos, header, write_index=True)
        except OSError:
            self._undo_append(pos)
            raise

    def _undo_append(self, pos: int) -> None:
        """Leave no bytes of a failed append behind (a torn write, or a whole batch whose
        index entry could not be written, e.g. on a full disk): the log is taken offline
        by its caller, and the restart's recovery must not find the batch either."""
        self.size = pos
        with contextlib.suppress(OSError):
            os.ftruncate(self.fd, pos)

    def append_together(
        self, batches: Sequence[bytes | bytearray], headers: Sequence[BatchHeader]
    ) -> None:
        """``append`` for consecutive batches, in one write (then each is indexed at
        its own position, as if appended alone)."""
        if len(batches) == 1:
            self.append(batches[0], headers[0])
            return
        start = pos = self.size
        self.append(b"".join(batches), headers[0], track=False)
        try:
            for header in headers:
                self._track(pos, header, write_index=True)
                pos += header.batch_length + LOG_OVERHEAD
        except OSError:
            self._undo_append(start)
            raise

    def on_inactive(self) -> None:
        """Record the final max timestamp so a reopened segment knows it without a scan."""
        self._maybe_append_time_entry(write=True)
        self.offset_index.close()
        self.time_index.close()

    def truncate_to(self, offset: int) -> int:
        """Drop every batch whose last offset is >= ``offset``. Returns bytes removed."""
        found = self.find(offset)
        if found is None:
            return 0
        removed = self.size - found.position
        os.ftruncate(self.fd, found.position)
        self.size = found.position
        self.recover()
        self.txn_index.truncate_to(offset)
        return removed

    # -- reading -----------------------------------------------------------------
    def read_at(self, position: int, size: int) -> bytes:
        return os.pread(self.fd, size, position)

    def read(
        self, offset: int, max_bytes: int, min_one_batch: bool, max_offset: int | None
    ) -> bytes | None:
        """Whole batches from the one holding ``offset``; None if no batch at/after it here."""
        first = self.find(offset)
        if first is None:
            return None
        start = first.position
        end = start
        for pos, header, _ in self.iter_batches(start):
            if max_offset is not None and header.last_offset >= max_offset:
                break
            if pos + header.size - start > max_bytes:
                if end == start and min_one_batch:
                    end = pos + header.size
                break
            end = pos + header.size
        return self.read_at(start, end - start) if end > start else b""

    def find_offset_for_timestamp(
        self, timestamp: int, starting_offset: int
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch with max timestamp >= ``timestamp``."""
        start_offset = max(self.time_index.lookup(timestamp), starting_offset)
        for _, header, _ in self.iter_batches(self.offset_index.lookup(start_offset)):
            if header.last_offset >= starting_offset and header.max_timestamp >= timestamp:
                return max(header.base_offset, starting_offset), header.max_timestamp
        return None

    # -- lifecycle ---------------------------------------------------------------
    def flush(self) -> None:
        os.fsync(self.fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.txn_index.flush()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self.txn_index.close()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def delete(self) -> None:
        self.close()
        self.log_path.unlink(missing_ok=True)
        self.offset_index.delete()
        self.time_index.delete()
        self.txn_index.delete()
