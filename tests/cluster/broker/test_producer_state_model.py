"""Property test: the partition's idempotence decisions match a small reference model,
across close/reopen (from a snapshot, or rebuilt from the log alone)."""

from __future__ import annotations

import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cluster.record_batches import make_batch
from txnchaos.cluster.broker.partition import Partition
from txnchaos.cluster.protocol.record_batch import INT32_MAX
from txnchaos.cluster.storage import LogConfig

CFG = LogConfig(segment_bytes=600, index_interval_bytes=64)
TOPIC_ID = uuid.UUID(int=1)


def wrap(seq: int, n: int) -> int:
    return (seq + n) % (INT32_MAX + 1)


@dataclass
class ModelProducer:
    epoch: int
    batches: list[tuple[int, int, int]] = field(default_factory=list)  # first, last, base


class Model:
    """Kafka's rules, written as plainly as possible."""

    def __init__(self, strict: bool) -> None:
        self.strict = strict
        self.producers: dict[int, ModelProducer] = {}
        self.leo = 0

    def next_seq(self, pid: int) -> int:
        p = self.producers.get(pid)
        return wrap(p.batches[-1][1], 1) if p and p.batches else 0

    def epoch(self, pid: int) -> int:
        p = self.producers.get(pid)
        return p.epoch if p else 0

    def send(self, pid: int, epoch: int, seq: int, count: int) -> tuple[int, int]:
        last = wrap(seq, count - 1)
        p = self.producers.get(pid)
        if p is not None and p.epoch == epoch:
            for first, last_seq, base in p.batches:
                if (first, last_seq) == (seq, last):
                    return 0, base
        if p is None:
            if seq != 0 and self.strict:
                return 59, -1
        elif epoch < p.epoch:
            return 47, -1
        elif epoch > p.epoch:
            if seq != 0:
                return 45, -1
        elif seq != wrap(p.batches[-1][1], 1):
            return 45, -1
        if p is None or p.epoch != epoch:
            p = self.producers[pid] = ModelProducer(epoch)
        base = self.leo
        self.leo += count
        p.batches = [*p.batches, (seq, last, base)][-5:]
        return 0, base


def open_partition(path: Path, strict: bool) -> Partition:
    return Partition("t", TOPIC_ID, 0, path, CFG, strict_unknown_producer=strict)


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(data=st.data(), strict=st.booleans())
def test_partition_matches_model(data: st.DataObject, strict: bool) -> None:
    model = Model(strict)
    sent: list[tuple[int, int, int, int]] = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp)
        part = open_partition(path, strict)
        for _ in range(data.draw(st.integers(5, 60), label="steps")):
            op = data.draw(st.sampled_from(["send", "send", "send", "retry", "reopen"]))
            if op == "reopen":
                part.close()
                if data.draw(st.booleans(), label="wipe snapshots"):
                    for snap in path.glob("*.snapshot"):
                        snap.unlink()
                part = open_partition(path, strict)
                continue
            if op == "retry" and sent:
                pid, epoch, seq, count = data.draw(st.sampled_from(sent), label="retry")
            else:
                pid = data.draw(st.integers(1, 3), label="pid")
                cur = model.epoch(pid)
                epoch = data.draw(
                    st.sampled_from([cur, cur, cur, cur + 1, max(cur - 1, 0)]), label="epoch"
                )
                nxt = model.next_seq(pid)
                seq = data.draw(
                    st.sampled_from(
                        [nxt, nxt, nxt, 0, wrap(nxt, 1), wrap(nxt, INT32_MAX), INT32_MAX - 1]
                    ),
                    label="seq",
                )
                count = data.draw(st.integers(1, 4), label="count")
            expected = model.send(pid, epoch, seq, count)
            raw = make_batch(count, producer_id=pid, epoch=epoch, base_sequence=seq)
            result = part.append_records(raw)
            assert (result.error_code, result.base_offset) == expected, (pid, epoch, seq, count)
            if expected[0] == 0:
                assert result.last_offset == expected[1] + count - 1
            sent.append((pid, epoch, seq, count))
            assert part.log_end_offset == model.leo
        part.close()
