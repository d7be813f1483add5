"""The log of one partition: an ordered list of segments in one directory.

Crash safety: every append is written with ``os.pwrite`` before ``append`` returns,
so it is in the page cache and survives SIGKILL. On open, segments holding offsets at
or after the ``recovery-point`` checkpoint are scanned batch by batch (length, magic,
CRC, offset order); the first bad batch and everything after it is cut off, and the
indexes are rebuilt. A clean ``close()`` leaves a ``clean-shutdown`` marker so the
next open only reads the indexes and the tail of each segment.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from bisect import bisect_right
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import NoReturn

from ..protocol.record_batch import (
    INT32_MAX,
    BatchHeader,
    check_length,
    parse_header,
    with_base_offset,
)
from .checkpoint import TMP_SUFFIX, fsync_dir, read_offset, write_offset
from .config import LogConfig
from .errors import OffsetOutOfRange
from .log_dir import LogDir, LogDirOffline
from .segment import LOG_SUFFIX, TXNINDEX_SUFFIX, LogSegment
from .txn_index import AbortedTxn

RECOVERY_POINT_FILE = "recovery-point"
LOG_START_OFFSET_FILE = "log-start-offset"
CLEAN_SHUTDOWN_FILE = "clean-shutdown"


class PartitionLog:
    """Segmented, crash-recoverable log. All offsets are absolute."""

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        clock: Callable[[], float] = time.time,
        log_dir: LogDir | None = None,
    ) -> None:
        self.directory = Path(directory)
        # The directory of logs this one is in: offline after any I/O error in it.
        self.log_dir = log_dir if log_dir is not None else LogDir(self.directory)
        self.config = config
        self._clock = clock
        self._segments: list[LogSegment] = []
        self._log_start_offset = 0
        self._recovery_point = 0
        self.recovered_bytes_truncated = 0  # what the last open cut off (for tests/metrics)
        self._closed = False
        # Called with the new segment's base offset after every roll (the partition
        # snapshots producer state there, as Kafka does).
        self.on_roll: Callable[[int], None] | None = None
        self.directory.mkdir(parents=True, exist_ok=True)
        self._load()

    # -- properties --------------------------------------------------------------
    @property
    def log_start_offset(self) -> int:
        return self._log_start_offset

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    @property
    def recovery_point(self) -> int:
        return self._recovery_point

    def _now_ms(self) -> int:
        return int(self._clock() * 1000)

    def _new_segment(self, base_offset: int) -> LogSegment:
        return LogSegment(
            self.directory, base_offset, self.config.index_interval_bytes, self._now_ms()
        )

    # -- loading -----------------------------------------------------------------
    def _load(self) -> None:
        for tmp in self.directory.glob("*" + TMP_SUFFIX):
            tmp.unlink(missing_ok=True)
        clean_marker = self.directory / CLEAN_SHUTDOWN_FILE
        clean = clean_marker.exists()
        if clean:
            # Remove it before any append, so a later crash is not taken for clean.
            clean_marker.unlink()
            fsync_dir(self.directory)
        recovery_point = read_offset(self.directory / RECOVERY_POINT_FILE) or 0
        bases = sorted(
            int(p.name[: -len(LOG_SUFFIX)])
            for p in self.directory.glob("*" + LOG_SUFFIX)
            if p.name[: -len(LOG_SUFFIX)].isdigit()
        )
        self._remove_orphan_txn_indexes(set(bases))
        segments = [self._new_segment(b) for b in bases]
        recovered = False
        kept: list[LogSegment] = []
        for i, seg in enumerate(segments):
            next_base = segments[i + 1].base_offset if i + 1 < len(segments) else None
            holds_unflushed = next_base is None or next_base > recovery_point
            prev_end = kept[-1].next_offset if kept else None
            ok = (clean or not holds_unflushed) and seg.load()
            if ok and prev_end is not None and seg.base_offset < prev_end:
                ok = False
            if not ok:
                recovered = True
                truncated = seg.recover(min_offset=prev_end)
                self.recovered_bytes_truncated += truncated
                kept.append(seg)
                if truncated:
                    # Whatever followed a corrupt batch cannot be trusted either.
                    for later in segments[i + 1 :]:
                        self.recovered_bytes_truncated += later.size
                        later.delete()
                    break
            else:
                kept.append(seg)
        self._segments = kept
        for seg in kept:
            # No abort marker can be past the end of its segment's batches.
            seg.txn_index.truncate_to(seg.next_offset)
        start = read_offset(self.directory / LOG_START_OFFSET_FILE)
        if not self._segments:
            self._segments = [self._new_segment(start or 0)]
        self._log_start_offset = max(start or 0, self._segments[0].base_offset)
        if self._log_start_offset > self.log_end_offset:
            self._truncate_fully_and_start_at(self._log_start_offset)
        if recovered:
            for seg in self._segments:
                seg.flush()
        self._write_recovery_point(self.log_end_offset)

    def _remove_orphan_txn_indexes(self, bases: set[int]) -> None:
        """A crash while deleting a segment can leave its ``.txnindex`` behind; a later
        segment with the same base offset must not inherit its entries."""
        for p in self.directory.glob("*" + TXNINDEX_SUFFIX):
            stem = p.name[: -len(TXNINDEX_SUFFIX)]
            if stem.isdigit() and int(stem) not in bases:
                p.unlink(missing_ok=True)

    def _write_recovery_point(self, offset: int) -> None:
        self._recovery_point = offset
        write_offset(self.directory / RECOVERY_POINT_FILE, offset)

    def _write_log_start_offset(self) -> None:
        write_offset(self.directory / LOG_START_OFFSET_FILE, self._log_start_offset)

    # -- appending ---------------------------------------------------------------
    def append(self, batch: bytes | bytearray, base_offset: int) -> BatchHeader:
        """Append one batch at ``base_offset`` (>= log end offset; the caller assigns offsets).

        The base offset in ``batch`` is rewritten if it differs. Returns the header as
        written. When this returns, the bytes are in the OS page cache.
        """
        header = parse_header(batch)
        check_length(header, 0, len(batch))
        if header.size != len(batch):
            raise ValueError(f"append takes exactly one batch ({len(batch)} bytes given)")
        if base_offset < self.log_end_offset:
            raise ValueError(
                f"base offset {base_offset} is below the log end offset {self.log_end_offset}"
            )
        if header.base_offset != base_offset:
            batch = with_base_offset(batch, base_offset)
            header = header._replace(base_offset=base_offset)
        try:
            seg = self.active_segment
            if self._should_roll(seg, header):
                seg = self.roll(base_offset)
            seg.append(batch, header)
        except OSError as exc:
            self.fail("appending", exc)
        return header

    def append_parsed(self, batch: bytes | bytearray, header: BatchHeader) -> None:
        """``append`` for a caller that parsed ``header`` from ``batch`` itself and
        assigned it the log end offset (the broker's produce and marker paths), so
        nothing is parsed or checked twice."""
        if self.log_dir.failure is not None:
            self.log_dir.check()
        seg = self._segments[-1]  # the active segment
        if header.base_offset != seg.next_offset or header.size != len(batch):
            raise ValueError(
                f"batch at {header.base_offset} ({header.size} bytes) does not go at the log "
                f"end offset {self.log_end_offset} ({len(batch)} bytes given)"
            )
        try:
            if self._should_roll(seg, header):
                seg = self.roll(header.base_offset)
            seg.append(batch, header)
        except OSError as exc:
            self.fail("appending", exc)

    def append_parsed_together(
        self, batches: Sequence[bytes | bytearray], headers: Sequence[BatchHeader]
    ) -> bool:
        """``append_parsed`` for consecutive batches (each header's base offset is the
        previous one's next offset) in one write, when they all go into the active
        segment without a roll. False, appending nothing, when they do not: the caller
        then appends them one by one (so segments roll exactly where they would)."""
        if self.log_dir.failure is not None:
            self.log_dir.check()
        seg = self._segments[-1]
        first, last = headers[0], headers[-1]
        total = 0
        expected = seg.next_offset
        for batch, header in zip(batches, headers, strict=True):
            if header.base_offset != expected or header.size != len(batch):
                raise ValueError(
                    f"batch at {header.base_offset} ({header.size} bytes) does not go at "
                    f"offset {expected} ({len(batch)} bytes given)"
                )
            expected = header.next_offset
            total += header.size
        if self._should_roll(seg, first):
            return False
        # Appended one by one, every batch after the first goes into a non-empty segment:
        # none of them may cross a roll condition either (the last one is the furthest).
        if len(headers) > 1 and self._rolls(seg, last.last_offset, seg.size + total, False):
            return False
        try:
            seg.append_together(batches, headers)
        except OSError as exc:
            self.fail("appending", exc)
        return True

    def fail(self, what: str, exc: OSError) -> NoReturn:
        """Take the log directory offline after an I/O error (see ``log_dir``) and raise
        :class:`LogDirOffline`; nothing is appended to it again until a restart."""
        if isinstance(exc, LogDirOffline):
            raise exc
        self.log_dir.fail(f"{what} {self.directory.name}", exc)
        raise LogDirOffline(f"{what} {self.directory.name} failed: {exc}") from exc

    @property
    def online(self) -> bool:
        return self.log_dir.online

    def _should_roll(self, seg: LogSegment, header: BatchHeader) -> bool:
        return self._rolls(seg, header.last_offset, seg.size + header.size, seg.is_empty)

    def _rolls(self, seg: LogSegment, last_offset: int, size_after: int, empty: bool) -> bool:
        """Whether a batch ending at ``last_offset`` that would bring ``seg`` to
        ``size_after`` bytes must go into a new segment (``empty``: ``seg`` holds nothing
        yet, so only the offset range counts)."""
        if last_offset - seg.base_offset > INT32_MAX:
            return True
        if empty:
            return False
        if size_after > self.config.segment_bytes:
            return True
        ms = self.config.segment_ms
        return ms is not None and self._now_ms() - seg.created_ms >= ms

    def roll(self, base_offset: int | None = None) -> LogSegment:
        """Start a new active segment at ``base_offset`` (default: the log end offset)."""
        base = self.log_end_offset if base_offset is None else base_offset
        old = self.active_segment
        if old.is_empty:
            old.delete()
            self._segments.pop()
        else:
            old.on_inactive()
        seg = self._new_segment(base)
        self._segments.append(seg)
        if self.on_roll is not None:
            self.on_roll(base)
        return seg

    # -- reading -----------------------------------------------------------------
    def _check_range(self, offset: int) -> None:
        if not self._log_start_offset <= offset <= self.log_end_offset:
            raise OffsetOutOfRange(offset, self._log_start_offset, self.log_end_offset)

    def _segment_index(self, offset: int) -> int:
        segments = self._segments
        if offset >= segments[-1].base_offset:
            return len(segments) - 1  # the active segment: appends, markers, tailing reads
        return max(bisect_right([s.base_offset for s in segments], offset) - 1, 0)

    def read(
        self,
        offset: int,
        max_bytes: int,
        min_one_batch: bool = True,
        max_offset: int | None = None,
    ) -> bytes:
        """Whole batches, starting with the one that contains ``offset``.

        At most ``max_bytes`` (but at least one batch when ``min_one_batch``), never a
        batch whose last offset is at/after ``max_offset``, from one segment.
        """
        if self.log_dir.failure is not None:
            self.log_dir.check()
        self._check_range(offset)
        if offset == self.log_end_offset:
            return b""
        for seg in self._segments[self._segment_index(offset) :]:
            data = seg.read(offset, max_bytes, min_one_batch, max_offset)
            if data is not None:
                return data
        return b""

    def scan(self, start_offset: int = 0) -> Iterator[tuple[LogSegment, int, BatchHeader]]:
        """(segment, position, header) of every batch whose last offset >= ``start_offset``."""
        for seg in self._segments[self._segment_index(start_offset) :]:
            first = seg.find(start_offset)
            if first is None:
                continue
            for pos, header, _ in seg.iter_batches(first.position):
                yield seg, pos, header

    def segment_for(self, offset: int) -> LogSegment:
        """The segment holding ``offset`` (the first one if it is below the log)."""
        return self._segments[self._segment_index(offset)]

    def append_aborted_txn(self, entry: AbortedTxn) -> None:
        """Index an aborted transaction in the segment holding its abort marker."""
        self.segment_for(entry.last_offset).txn_index.append(entry)

    def collect_aborted_transactions(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """The aborted transactions overlapping [fetch_offset, upper_bound) (KIP-98).

        Scans the transaction indexes of the segment holding ``fetch_offset`` and of
        every later segment, until an entry's last stable offset reaches
        ``upper_bound``: a transaction whose data is in the range ends at or after
        ``fetch_offset``, so its entry is in one of these segments.
        """
        found: list[AbortedTxn] = []
        for seg in self._segments[self._segment_index(fetch_offset) :]:
            entries, complete = seg.txn_index.collect(fetch_offset, upper_bound)
            found.extend(entries)
            if complete:
                break
        return found

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first batch with max timestamp >= ``timestamp_ms``.

        The offset is the batch's base offset (records are not decoded), never below the
        log start offset; the timestamp is the batch's max timestamp.
        """
        for seg in self._segments:
            if seg.max_timestamp >= timestamp_ms and seg.next_offset > self._log_start_offset:
                found = seg.find_offset_for_timestamp(timestamp_ms, self._log_start_offset)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp): base offset of the first batch holding the max timestamp."""
        best: LogSegment | None = None
        for seg in self._segments:
            if seg.next_offset <= self._log_start_offset or seg.max_timestamp < 0:
                continue
            if best is None or seg.max_timestamp > best.max_timestamp:
                best = seg
        if best is None:
            return None
        return max(best.offset_of_max_timestamp, self._log_start_offset), best.max_timestamp

    # -- deleting ----------------------------------------------------------------
    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to ``offset``; drop segments wholly below it."""
        if offset > self.log_end_offset or offset < 0:
            raise OffsetOutOfRange(offset, self._log_start_offset, self.log_end_offset)
        self.log_dir.check()
        if offset > self._log_start_offset:
            self._log_start_offset = offset
            try:
                self._write_log_start_offset()
                self._delete_segments_below(offset)
            except OSError as exc:
                self.fail("deleting records of", exc)
        return self._log_start_offset

    def _segment_end(self, i: int) -> int:
        if i + 1 < len(self._segments):
            return self._segments[i + 1].base_offset
        return self._segments[i].next_offset

    def _delete_segments_below(self, offset: int) -> None:
        while self._segment_end(0) <= offset and not self._segments[0].is_empty:
            if len(self._segments) == 1:
                self.roll()
            self._segments.pop(0).delete()

    def apply_retention(self, now_ms: int) -> int:
        """Delete the oldest segments past retention_ms / retention_bytes (never the
        active one). Returns how many were deleted."""
        deleted = 0
        retention_ms = self.config.retention_ms
        if retention_ms >= 0:
            while len(self._segments) > 1 and now_ms - _largest_ts(self._segments[0]) > (
                retention_ms
            ):
                self._segments.pop(0).delete()
                deleted += 1
        retention_bytes = self.config.retention_bytes
        if retention_bytes >= 0:
            total = self.size_bytes
            while len(self._segments) > 1 and total - self._segments[0].size >= retention_bytes:
                seg = self._segments.pop(0)
                total -= seg.size
                seg.delete()
                deleted += 1
        if self._segments[0].base_offset > self._log_start_offset:
            self._log_start_offset = self._segments[0].base_offset
            self._write_log_start_offset()
        return deleted

    def truncate_to(self, offset: int) -> None:
        """Remove every batch with offsets at/after ``offset`` (whole batches)."""
        if offset >= self.log_end_offset:
            return
        if offset <= self._segments[0].base_offset:
            self._truncate_fully_and_start_at(offset)
            return
        while self._segments[-1].base_offset >= offset:
            self._segments.pop().delete()
        self.active_segment.truncate_to(offset)
        if self._log_start_offset > self.log_end_offset:
            self._log_start_offset = self.log_end_offset
            self._write_log_start_offset()
        if self._recovery_point > self.log_end_offset:
            self._write_recovery_point(self.log_end_offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        for seg in self._segments:
            seg.delete()
        self._segments = [self._new_segment(offset)]
        self._log_start_offset = offset
        self._write_log_start_offset()
        self._write_recovery_point(offset)

    # -- lifecycle ---------------------------------------------------------------
    def flush(self) -> None:
        """fsync every segment holding unflushed offsets, then move the recovery point."""
        self.log_dir.check()
        try:
            self._flush()
        except OSError as exc:
            self.fail("flushing", exc)

    def _flush(self) -> None:
        end = self.log_end_offset
        for i, seg in enumerate(self._segments):
            if self._segment_end(i) > self._recovery_point or i == len(self._segments) - 1:
                seg.flush()
        self._write_recovery_point(end)

    def close(self) -> None:
        if self._closed:
            return
        if not self.log_dir.online:
            # No checkpoint and no clean-shutdown marker: the next open recovers it.
            for seg in self._segments:
                with contextlib.suppress(OSError):
                    seg.close()
            self._closed = True
            return
        self.active_segment.on_inactive()
        self.flush()
        self._write_log_start_offset()
        (self.directory / CLEAN_SHUTDOWN_FILE).touch()
        fsync_dir(self.directory)
        for seg in self._segments:
            seg.close()
        self._closed = True

    def delete(self) -> None:
        """Close without a checkpoint and remove the whole directory."""
        for seg in self._segments:
            seg.close()
        self._closed = True
        shutil.rmtree(self.directory, ignore_errors=True)


def _largest_ts(seg: LogSegment) -> int:
    """Kafka's LogSegment.largestTimestamp: max timestamp, else the file's mtime."""
    if seg.max_timestamp >= 0:
        return seg.max_timestamp
    with contextlib.suppress(FileNotFoundError):
        return int(os.stat(seg.log_path).st_mtime * 1000)
    return 0
