"""SIGKILL a process while it appends; every acknowledged batch must survive."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.protocol.record_batch import crc_ok, iter_batches
from txnchaos.cluster.storage import LogConfig

CFG = LogConfig(segment_bytes=4096, index_interval_bytes=256)
TOPIC_ID = uuid.UUID(int=7)

CHILD = textwrap.dedent(
    """
    import sys, uuid
    from pathlib import Path
    sys.path.insert(0, {helpers!r})
    from tests.cluster.record_batches import make_batch
    from txnchaos.cluster.broker.partition import Partition
    from txnchaos.cluster.storage import LogConfig

    cfg = LogConfig(segment_bytes=4096, index_interval_bytes=256)
    part = Partition("t", uuid.UUID(int=7), 0, Path({directory!r}), cfg)
    seq = 0
    for i in range(1_000_000):
        count = 1 + i % 3
        raw = make_batch(count, producer_id=1, epoch=0, base_sequence=seq, value_size=40 + i % 50)
        result = part.append_records(raw)
        assert result.error_code == 0, result
        sys.stdout.write(f"{{result.base_offset}} {{seq}} {{count}}\\n")
        sys.stdout.flush()
        seq += count
    """
)


def _read_acks(proc: subprocess.Popen[bytes], want: int) -> list[bytes]:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    while buf.count(b"\n") < want:
        ready, _, _ = select.select([fd], [], [], 60)
        assert ready, "child produced no acknowledgement within 60 s"
        chunk = os.read(fd, 65536)
        assert chunk, "child exited early"
        buf += chunk
    return [buf]


def test_sigkill_while_appending_loses_no_acknowledged_batch(tmp_path: Path) -> None:
    directory = tmp_path / "p"
    code = CHILD.format(helpers=str(Path(__file__).resolve().parents[3]), directory=str(directory))
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        chunks = _read_acks(proc, 400)
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert proc.stdout is not None
    chunks.append(proc.stdout.read())  # acks written before the kill but not yet read
    text = b"".join(chunks).decode()
    lines = text.split("\n")[:-1]  # a trailing partial line was never acknowledged
    acks = [tuple(map(int, line.split())) for line in lines]
    assert len(acks) >= 400

    part = Partition("t", TOPIC_ID, 0, directory, CFG)
    found = []
    offset = 0
    while offset < part.log_end_offset:
        res = part.read(offset, 1 << 20)
        assert res.error_code == 0 and res.records
        for pos, h in iter_batches(res.records):
            assert crc_ok(res.records, pos, h)
            found.append((h.base_offset, h.base_sequence, h.records_count))
            offset = h.next_offset
    assert found[: len(acks)] == acks  # every acknowledged batch, in order
    assert len(found) - len(acks) <= 1  # at most the one in flight when killed
    # producer state was rebuilt: the next sequence continues after the last batch
    last_offset, last_seq, last_count = found[-1]
    retry = part.append_records(_batch(last_seq, last_count))
    assert retry.duplicate and retry.base_offset == last_offset
    nxt = part.append_records(_batch(last_seq + last_count, 1))
    assert nxt.error_code == 0 and nxt.base_offset == last_offset + last_count
    part.close()


def _batch(seq: int, count: int) -> bytes:
    from tests.cluster.record_batches import make_batch

    return make_batch(count, producer_id=1, epoch=0, base_sequence=seq)
