"""Issue 35 item 1: a full disk loses no acknowledged write. A real ENOSPC (a filled
tmpfs, see tests/disk.py) in the middle of an append takes the log offline: the failed
batch is neither served nor followed by an acknowledged append that recovery would cut
off, and a restart brings the log back to its last complete batch."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from tests.disk import fill, small_disk
from txnchaos.cluster.broker.partition import KAFKA_STORAGE_ERROR, NONE, Partition
from txnchaos.cluster.protocol.record_batch import iter_batches
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.cluster.storage import LogConfig
from txnchaos.cluster.storage.log_dir import LogDir, LogDirOffline
from txnchaos.cluster.storage.state_log import Record, StateLog

TOPIC_ID = uuid.uuid4()
# Every batch after the first writes an offset-index entry, so the index file is written
# (and needs a page of its own) after the batch's bytes fit into the log's first page.
CFG = LogConfig(index_interval_bytes=0)


def open_partition(root: Path) -> Partition:
    return Partition("t", TOPIC_ID, 0, root / "t-0", CFG, log_dir=LogDir(root))


def values(partition: Partition) -> list[int]:
    """The base offsets of the batches a read from the start returns."""
    result = partition.read(0, 1 << 20)
    assert result.error_code == NONE, result
    return [h.base_offset for _, h in iter_batches(result.records)]


def test_full_disk_while_indexing_takes_the_log_offline(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        partition = open_partition(disk)
        assert partition.append_records(encode_batch([b"acked-0"])).base_offset == 0
        filler = fill(disk)
        failed = partition.append_records(encode_batch([b"failed"]))
        assert failed.error_code == KAFKA_STORAGE_ERROR
        # the failed batch is not served, and nothing is acknowledged after it
        assert partition.read(0, 1 << 20).error_code == KAFKA_STORAGE_ERROR
        filler.unlink()
        again = partition.append_records(encode_batch([b"after"]))
        assert again.error_code == KAFKA_STORAGE_ERROR, again  # was acked at offset 1
        # kill -9 and restart: the log holds exactly what was acknowledged
        restarted = open_partition(disk)
        assert restarted.log_end_offset == 1
        assert restarted.append_records(encode_batch([b"acked-1"])).base_offset == 1
        assert values(restarted) == [0, 1]
        restarted.close()
        partition.log.close()


def test_full_disk_in_the_state_log_acks_nothing_behind_a_torn_frame(tmp_path: Path) -> None:
    with small_disk(tmp_path / "disk") as disk:
        slog = StateLog(disk / "__transaction_state-0.log")
        slog.replay()
        slog.append(Record(b"epoch-17", b"1"))
        filler = fill(disk)
        with pytest.raises(OSError):  # a short write, then ENOSPC: a torn frame
            slog.append(Record(b"epoch-18", b"x" * 8000))
        filler.unlink()
        with pytest.raises(LogDirOffline):  # was acknowledged, then cut off by recovery
            slog.append(Record(b"epoch-19", b"1"))
        slog.close()
        reopened = StateLog(disk / "__transaction_state-0.log")
        assert [r.key for r in reopened.replay()] == [b"epoch-17"]
        reopened.append(Record(b"epoch-18", b"1"))
        reopened.close()
        assert [r.key for r in StateLog(disk / "__transaction_state-0.log").replay()] == [
            b"epoch-17",
            b"epoch-18",
        ]
