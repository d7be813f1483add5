"""What a power loss can leave of a stopped node's files: a torn tail after the last complete
write. ``kill -9`` never leaves one (every byte a process wrote is in the page cache), so a
cluster's recovery checks (batch CRCs, truncating a log after its last valid batch, dropping
a half-written index entry or state-log frame, skipping a damaged snapshot) are otherwise
never exercised. :func:`tear_node` damages a node's data directory, while the node is down,
the way an interrupted write does:

* the active segment of every partition gets a torn batch after its last one: the header of
  a batch at the next offset (a copy of the last data batch's, or of a marker's in a segment
  of markers only, as the batch being written
  when the power failed) whose second half never reached the disk (zeros), so its CRC does
  not match. It was never acknowledged: no acknowledged byte is touched;
* the aborted-transaction index of that segment gets half an entry;
* the newest producer-state snapshot is emptied (a file the disk lost, as a lying disk or a
  file system without write barriers can leave one; Kafka's loader deletes such a snapshot
  and rebuilds from an older one or from the log);
* every coordinator state log (``transactions/``, ``groups/``) gets a frame whose payload was
  cut short.

A correct recovery cuts every torn tail off, ignores the damaged snapshot, and serves
exactly what was acknowledged. Two layouts are read: the project's own node's
(``cluster/storage``: ``partitions/<topic>-<n>/`` and the state logs) and an Apache Kafka
log directory (``<topic>-<n>/`` directly in it, the coordinators' state in the
``__transaction_state`` and ``__consumer_offsets`` partitions). Both keep a partition as
record-batch segments with ``.txnindex`` and ``.snapshot`` files of the same formats.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

from ...cluster.protocol.record_batch import (
    HEADER_SIZE,
    CorruptBatch,
    compute_crc,
    iter_batches,
    set_base_offset,
)

LOG_SUFFIX = ".log"
SNAPSHOT_SUFFIX = ".snapshot"
TXNINDEX_SUFFIX = ".txnindex"
TXNINDEX_ENTRY = 34
STATE_LOG_DIRS = ("transactions", "groups")
_FRAME = struct.Struct(">II")


def _numbered(directory: Path, suffix: str) -> list[Path]:
    return sorted(
        (p for p in directory.glob("*" + suffix) if p.name[: -len(suffix)].isdigit()),
        key=lambda p: int(p.name[: -len(suffix)]),
    )


def _append(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def torn_batch(segment: bytes) -> bytes | None:
    """The torn batch to append to a segment holding ``segment``: the last data batch's bytes
    (a marker's when the segment holds only markers) at the next offset, its second half zeros
    (CRC broken); None: an empty segment, nothing to copy."""
    last = last_any = None
    next_offset = None
    try:
        for pos, header in iter_batches(segment):
            next_offset = header.next_offset
            last_any = (pos, header)
            if not header.is_control:
                last = (pos, header)
    except CorruptBatch:
        pass  # already torn: tear after the part that parses
    last = last or last_any
    if last is None or next_offset is None:
        return None
    pos, header = last
    torn = bytearray(segment[pos : pos + header.size])
    set_base_offset(torn, 0, next_offset)
    cut = max(HEADER_SIZE, header.size // 2)
    torn[cut:] = bytes(len(torn) - cut)
    if compute_crc(torn, 0, len(torn)) == header.crc:
        torn[-1] ^= 0xFF  # zeros that were zeros already: still a torn write
    return bytes(torn)


def tear_partition(directory: Path) -> list[str]:
    """Tear one partition directory; what was done, one line each."""
    done: list[str] = []
    segments = _numbered(directory, LOG_SUFFIX)
    if segments:
        active = segments[-1]
        torn = torn_batch(active.read_bytes())
        if torn is not None:
            _append(active, torn)
            done.append(f"{directory.name}: a torn {len(torn)}-byte batch after {active.name}")
        index = active.with_name(active.name[: -len(LOG_SUFFIX)] + TXNINDEX_SUFFIX)
        if index.exists() and index.stat().st_size >= TXNINDEX_ENTRY:
            _append(index, index.read_bytes()[-TXNINDEX_ENTRY:][: TXNINDEX_ENTRY // 2])
            done.append(f"{directory.name}: half an entry after {index.name}")
    snapshots = _numbered(directory, SNAPSHOT_SUFFIX)
    if snapshots:
        snapshots[-1].write_bytes(b"")
        done.append(f"{directory.name}: {snapshots[-1].name} emptied")
    return done


def tear_state_log(path: Path) -> str | None:
    """A frame whose payload was cut short after the last one of a coordinator state log."""
    if path.stat().st_size == 0:
        return None
    _append(path, _FRAME.pack(64, 0x5EED) + bytes(20))
    return f"{path.parent.name}/{path.name}: a frame cut short"


def _partition_dirs(node_dir: Path) -> list[Path]:
    """The partition directories of a node: ``partitions/*`` (the project's nodes) or, without
    one, every ``<topic>-<n>`` directory in it (an Apache Kafka log directory)."""
    partitions = node_dir / "partitions"
    if partitions.is_dir():
        return sorted(p for p in partitions.iterdir() if p.is_dir())
    if not node_dir.is_dir():
        return []
    return sorted(
        p for p in node_dir.iterdir() if p.is_dir() and p.name.rpartition("-")[2].isdigit()
    )


def tear_node(node_dir: Path) -> list[str]:
    """Tear every partition and state log of a stopped node's data directory."""
    done: list[str] = []
    for d in _partition_dirs(node_dir):
        done += tear_partition(d)
    for sub in STATE_LOG_DIRS:
        directory = node_dir / sub
        if directory.is_dir():
            for log in sorted(directory.glob("*" + LOG_SUFFIX)):
                line = tear_state_log(log)
                if line is not None:
                    done.append(line)
    return done
