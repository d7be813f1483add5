"""Client processes for the transaction suites: each runs as its own process so a test
can SIGKILL it at a chosen point (``txn_clients_support.Helper``).

``hang BOOTSTRAP TXN_ID TOPIC PARTITIONS COUNT PREFIX TIMEOUT_MS``
    init_transactions, begin, produce COUNT records (values PREFIX-i) round-robin over
    the comma-separated PARTITIONS, flush, print ``READY``, then block forever.

``copy BOOTSTRAP TXN_ID GROUP IN_TOPIC OUT_TOPIC BATCH PAUSE_S [HOLD]``
    Consume-transform-produce: every input record becomes ``out:<value>`` on the same
    partition of OUT_TOPIC, committed together with the input offsets
    (send_offsets_to_transaction). Prints ``INTXN <n>`` once a transaction's records
    are flushed, ``OFFSETS <n>`` once its offsets are sent (both before its commit),
    ``COMMITTED <n>`` after the n-th commit, and
    ``DONE`` when the group's committed offsets reach the end of the input.
    ``HOLD`` (``INTXN@n`` or ``OFFSETS@n``) stops the copier right after it prints
    that line for transaction n, until it is killed: a test that kills it there knows
    the transaction is still open, however slowly it reads the line.
"""

from __future__ import annotations

import sys
import time

from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition


def hang(
    bootstrap: str,
    txn_id: str,
    topic: str,
    partitions: str,
    count: str,
    prefix: str,
    timeout_ms: str,
) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": int(timeout_ms),
        }
    )
    producer.init_transactions(60)
    producer.begin_transaction()
    parts = [int(p) for p in partitions.split(",")]
    for i in range(int(count)):
        producer.produce(topic, f"{prefix}-{i}".encode(), partition=parts[i % len(parts)])
    if producer.flush(60) != 0:
        raise SystemExit("flush did not complete")
    print("READY", flush=True)
    sys.stdin.read()  # until killed (or stdin closes)


def _input_ends(consumer: Consumer, topic: str) -> dict[int, int]:
    md = consumer.list_topics(topic, timeout=30)
    ends = {}
    for p in md.topics[topic].partitions:
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
        ends[p] = high
    return ends


def _caught_up(consumer: Consumer, topic: str, ends: dict[int, int]) -> bool:
    committed = consumer.committed([TopicPartition(topic, p) for p in ends], timeout=30)
    return all(tp.offset >= ends[tp.partition] for tp in committed)


def _rewind(consumer: Consumer) -> None:
    """After an abort: go back to the committed offsets of the current assignment."""
    assignment = consumer.assignment()
    if not assignment:
        return
    for tp in consumer.committed(assignment, timeout=30):
        offset = tp.offset if tp.offset >= 0 else 0
        consumer.seek(TopicPartition(tp.topic, tp.partition, offset))


def _say(line: str, hold: str) -> None:
    """Print ``line``; if it is the held stage (``INTXN 6`` for ``INTXN@6``), block
    until killed (or stdin closes, which ends the process with an error)."""
    print(line, flush=True)
    if hold and line == hold.replace("@", " "):
        sys.stdin.read()
        raise SystemExit(f"held at {line!r} and was not killed")


def copy(
    bootstrap: str,
    txn_id: str,
    group: str,
    in_topic: str,
    out_topic: str,
    batch: str,
    pause_s: str,
    hold: str = "",
) -> None:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": txn_id,
            "transaction.timeout.ms": 30_000,
            "linger.ms": 5,
        }
    )
    producer.init_transactions(60)
    ends = _input_ends(consumer, in_topic)
    consumer.subscribe([in_topic])
    commits = 0
    while True:
        msgs = [m for m in consumer.consume(num_messages=int(batch), timeout=0.5) if not m.error()]
        if not msgs:
            if _caught_up(consumer, in_topic, ends):
                print("DONE", flush=True)
                break
            continue
        producer.begin_transaction()
        try:
            for m in msgs:
                producer.produce(out_topic, b"out:" + m.value(), partition=m.partition())
            while producer.flush(60):  # INTXN promises every record delivered
                pass
            _say(f"INTXN {commits + 1}", hold)
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 60)
            _say(f"OFFSETS {commits + 1}", hold)
            producer.commit_transaction(60)
        except KafkaException as exc:
            if not exc.args[0].txn_requires_abort():
                raise
            print(f"ABORT {exc}", flush=True)
            producer.abort_transaction(60)
            _rewind(consumer)
            continue
        commits += 1
        print(f"COMMITTED {commits}", flush=True)
        time.sleep(float(pause_s))
    consumer.close()


if __name__ == "__main__":
    command, *rest = sys.argv[1:]
    {"hang": hang, "copy": copy}[command](*rest)
