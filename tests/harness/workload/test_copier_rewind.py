"""A copier whose transaction did not commit goes back to the group's committed offsets
before it copies anything more. When that rewind fails (the group coordinator did not
answer: on Apache Kafka 4.4.0's network mix a TxnOffsetCommit timed out, the transaction
was fenced, and the group's offsets could not be fetched either), the copier polls nothing
until a rewind succeeds: copying on from the consumer's position would skip the inputs of
the transaction that did not commit (missing output, with the group's offsets past them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from txnchaos.harness.workload.config import load_workload
from txnchaos.harness.workload.kinds.eos_copier import EOSCopierWorker
from txnchaos.harness.workload.topics import ensure_topics
from txnchaos.harness.workload.workers import WorkerContext

RECORDS = 30


def committed_count(bootstrap: str, topic: str) -> int:
    """Records a read_committed consumer reads from ``topic`` (2 partitions) to its end."""
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "rewind-reader",
            "isolation.level": "read_committed",
            "enable.partition.eof": True,
        }
    )
    try:
        c.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        count, at_end = 0, set()
        while at_end != {0, 1}:
            for m in c.consume(100, 5.0):
                if m.error() is None:
                    count += 1
                    at_end.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
        return count
    finally:
        c.close()


def group_at_end(bootstrap: str, group: str, topic: str) -> bool:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        parts = c.committed([TopicPartition(topic, p) for p in (0, 1)], timeout=30)
        return all(tp.offset == RECORDS // 2 for tp in parts)
    finally:
        c.close()


class CommittedFailsOnce(Consumer):  # type: ignore[misc]
    """A real consumer whose first fetch of the group's committed offsets fails, as one
    sent to a coordinator that does not answer does."""

    failures = 1

    def committed(self, *args: Any, **kwargs: Any) -> Any:
        if CommittedFailsOnce.failures:
            CommittedFailsOnce.failures -= 1
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "scripted: no answer"))
        return super().committed(*args, **kwargs)


def test_a_failed_rewind_stops_the_copier_until_a_rewind_succeeds(
    wl_bootstrap: str, uniq: str, tmp_path: Path
) -> None:
    src, dst = f"rewind-in-{uniq}", f"rewind-out-{uniq}"
    cfg = load_workload(
        {
            "topics": [{"name": src, "partitions": 2}, {"name": dst, "partitions": 2}],
            "users": [
                {
                    "kind": "eos_copier",
                    "input_topics": [src],
                    "output_topic": dst,
                    "group_id": f"rewind-{uniq}",
                    "max_records_per_txn": 5,
                    "abort_probability": 0,
                }
            ],
        }
    )
    ensure_topics(wl_bootstrap, cfg.topics)
    producer = Producer({"bootstrap.servers": wl_bootstrap})
    for i in range(RECORDS):
        producer.produce(src, f"in-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0

    CommittedFailsOnce.failures = 1
    ctx = WorkerContext(cfg, tmp_path / "run", wl_bootstrap, consumer_factory=CommittedFailsOnce)
    w = EOSCopierWorker(cfg.users[0], ctx, "copier-0", 0)
    w.start()
    try:
        assert w.consumer is not None
        # a transaction's inputs taken and then not committed: the consumer is past them
        taken: list[Any] = []
        while not taken:
            taken = w.consumer.poll(5, 5.0)
        assert not w._rewound() and w.rewind_pending  # the scripted failure
        for _ in range(200):
            w.step()
            if group_at_end(wl_bootstrap, f"rewind-{uniq}", src):
                break
        assert not w.rewind_pending
    finally:
        w.stop()
    assert group_at_end(wl_bootstrap, f"rewind-{uniq}", src)
    # every input was copied by a committed transaction, the ones taken first included
    assert committed_count(wl_bootstrap, dst) == RECORDS
