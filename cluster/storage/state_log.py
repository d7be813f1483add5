"""A tiny append-only key/value record file: the durable state of one coordinator partition.

Coordinators (groups now, transactions next) keep their state in memory and make it
survive ``kill -9`` by appending every change here before they answer the request
that caused it. The file is a sequence of frames::

    uint32 payload_length | uint32 crc32c(payload) | payload

and a payload is one or more entries, applied together (a frame is the unit of
atomicity: a torn write loses the whole frame, never half of it)::

    uint32 key_length | key | int32 value_length (-1 = tombstone) | value

Replaying applies entries in order; a later value for a key replaces the earlier one
and a tombstone deletes it. Recovery stops at the first frame that is incomplete or
fails its checksum and truncates the file there, so appends after a crash never
follow garbage. (A corrupt frame in the middle of the file therefore also drops every
frame after it: the state stays a prefix of what was written, which is what a
coordinator can reason about.)

Compaction rewrites the live key/value pairs into a temporary file and moves it over
the log with ``os.replace``; a crash at any point leaves either the old or the new file.
"""

from __future__ import annotations

import contextlib
import logging
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import crc32c

from .log_dir import LogDirOffline

log = logging.getLogger(__name__)

_FRAME = struct.Struct(">II")
_KEY_LEN = struct.Struct(">I")
_VALUE_LEN = struct.Struct(">i")

MAX_FRAME_BYTES = 256 * 1024 * 1024
"""A length field above this is treated as corruption rather than trusted."""


@dataclass(frozen=True, slots=True)
class Record:
    """One key/value change. ``value=None`` is a tombstone (the key is deleted)."""

    key: bytes
    value: bytes | None


def encode_frame(records: Iterable[Record]) -> bytes:
    """Frame records so that they are replayed all together or not at all."""
    parts: list[bytes] = []
    count = 0
    for record in records:
        parts.append(_KEY_LEN.pack(len(record.key)))
        parts.append(record.key)
        if record.value is None:
            parts.append(_VALUE_LEN.pack(-1))
        else:
            parts.append(_VALUE_LEN.pack(len(record.value)))
            parts.append(record.value)
        count += 1
    if count == 0:
        raise ValueError("a frame needs at least one record")
    payload = b"".join(parts)
    return _FRAME.pack(len(payload), crc32c.crc32c(payload)) + payload


def _decode_payload(payload: bytes) -> list[Record] | None:
    """The records of a payload whose CRC matched, or None if it is malformed."""
    records: list[Record] = []
    pos = 0
    end = len(payload)
    while pos < end:
        if pos + _KEY_LEN.size > end:
            return None
        (klen,) = _KEY_LEN.unpack_from(payload, pos)
        pos += _KEY_LEN.size
        if pos + klen + _VALUE_LEN.size > end:
            return None
        key = payload[pos : pos + klen]
        pos += klen
        (vlen,) = _VALUE_LEN.unpack_from(payload, pos)
        pos += _VALUE_LEN.size
        if vlen < -1 or pos + max(vlen, 0) > end:
            return None
        value = None if vlen == -1 else payload[pos : pos + vlen]
        pos += max(vlen, 0)
        records.append(Record(key, value))
    return records or None


def scan(data: bytes) -> tuple[list[Record], int]:
    """Decode frames from ``data``; returns the records and the length of the valid prefix."""
    records: list[Record] = []
    pos = 0
    end = len(data)
    while pos + _FRAME.size <= end:
        length, crc = _FRAME.unpack_from(data, pos)
        start = pos + _FRAME.size
        if length > MAX_FRAME_BYTES or start + length > end:
            break
        payload = data[start : start + length]
        if crc32c.crc32c(payload) != crc:
            break
        decoded = _decode_payload(payload)
        if decoded is None:
            break
        records.extend(decoded)
        pos = start + length
    return records, pos


class StateLog:
    """The record file of one coordinator partition.

    ``fsync=True`` makes every append durable against power loss too; without it an
    append survives a process crash (``kill -9``) because it is in the page cache once
    ``os.write`` returns.
    """

    def __init__(
        self, path: Path, *, fsync: bool = False, compact_min_bytes: int = 16 * 1024 * 1024
    ) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.compact_min_bytes = compact_min_bytes
        self._fd: int | None = None
        self._size = 0
        self._compact_at = compact_min_bytes
        self.failure: str | None = None  # the I/O error that took it offline

    # -- reading -------------------------------------------------------------------------

    def replay(self) -> Iterator[Record]:
        """Every record in the file, in order, after truncating a torn or corrupt tail.

        The file is read and repaired before the first record is yielded, so the log
        is ready for appends as soon as this is called.
        """
        records = self._recover()
        return iter(records)

    def load(self) -> dict[bytes, bytes]:
        """The live key/value pairs: replay with last-value-wins and tombstones applied."""
        state: dict[bytes, bytes] = {}
        for record in self.replay():
            if record.value is None:
                state.pop(record.key, None)
            else:
                state[record.key] = record.value
        return state

    def _recover(self) -> list[Record]:
        self.close()
        self.failure = None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            data = b""
        records, valid = scan(data)
        if valid < len(data):
            log.warning(
                "%s: truncating %d bytes of torn or corrupt tail at offset %d",
                self.path,
                len(data) - valid,
                valid,
            )
            with open(self.path, "r+b") as fh:
                fh.truncate(valid)
                fh.flush()
                os.fsync(fh.fileno())
        self._open(valid)
        return records

    def _open(self, size: int) -> None:
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = size
        self._compact_at = max(self.compact_min_bytes, 2 * size)

    # -- writing -------------------------------------------------------------------------

    def append(self, record: Record) -> None:
        """Append one record; it is in the file (page cache, or disk with fsync) on return."""
        self.append_batch((record,))

    def append_batch(self, records: Iterable[Record]) -> None:
        """Append records as one frame: after a crash, all of them are there or none.

        An I/O error (a full disk, a short write) takes the log offline: the torn frame is
        cut off if possible, and every later append raises :class:`LogDirOffline` until
        the log is replayed again (a restart, or the partition's next load), so no
        acknowledged change can ever sit behind a torn frame that recovery stops at."""
        if self.failure is not None:
            raise LogDirOffline(f"{self.path} is offline: {self.failure}")
        frame = encode_frame(records)
        if self._fd is None:
            self._recover()
        assert self._fd is not None
        try:
            written = os.write(self._fd, frame)  # a small frame is written whole
            if written < len(frame):
                _write_all(self._fd, memoryview(frame)[written:])
            if self.fsync:
                os.fsync(self._fd)
        except OSError as exc:
            self._fail(exc)
            raise LogDirOffline(f"appending to {self.path} failed: {exc}") from exc
        self._size += len(frame)

    def _fail(self, exc: OSError) -> None:
        self.failure = str(exc)
        log.error(
            "%s is offline until it is loaded again, after an I/O error while appending: %s",
            self.path,
            exc,
        )
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._size)  # type: ignore[arg-type]

    @property
    def size(self) -> int:
        """Bytes in the file (valid frames only)."""
        return self._size

    def needs_compaction(self) -> bool:
        """True once the file has grown past twice its size after the last compaction
        (and past ``compact_min_bytes``)."""
        return self._size >= self._compact_at

    def compact(self, live: Iterable[Record]) -> None:
        """Atomically replace the file's content with ``live`` (tombstones are dropped)."""
        if self.failure is not None:
            raise LogDirOffline(f"{self.path} is offline: {self.failure}")
        tmp = self.path.with_name(self.path.name + ".compact.tmp")
        size = 0
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            batch: list[Record] = []
            batch_bytes = 0
            for record in live:
                if record.value is None:
                    continue
                batch.append(record)
                batch_bytes += len(record.key) + len(record.value) + 8
                if batch_bytes >= 1024 * 1024:
                    size += _write_all(fd, encode_frame(batch))
                    batch, batch_bytes = [], 0
            if batch:
                size += _write_all(fd, encode_frame(batch))
            os.fsync(fd)
        except BaseException:
            tmp.unlink(missing_ok=True)  # the log itself is untouched
            raise
        finally:
            os.close(fd)
        self.close()
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        self._open(size)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _write_all(fd: int, data: bytes | memoryview) -> int:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    return len(data)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


__all__ = ["MAX_FRAME_BYTES", "Record", "StateLog", "encode_frame", "scan"]
