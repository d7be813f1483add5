"""Produce/consume throughput of one txnchaos broker with confluent-kafka.

An idempotent producer (acks=all, lz4 unless --compression, 100-byte records) writes N
records to one partition; a consumer reads them back. Prints records/s for both, the CPU seconds the
node spent in each phase (steadier than records/s on a loaded machine) and the node's
peak RSS. Run: .venv/bin/python bench/produce_consume.py [--records N]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from txnchaos.harness.launch.local import LocalCluster


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--record-bytes", type=int, default=100)
    parser.add_argument(
        "--compression", default="lz4", choices=["none", "gzip", "snappy", "lz4", "zstd"]
    )
    args = parser.parse_args()

    root = Path(tempfile.mkdtemp(prefix="txnchaos-bench-"))
    cluster = LocalCluster.prepare(root, 1, 0, [])
    cluster.up()
    try:
        state = cluster.state()
        bootstrap = state["bootstrap"]
        pid = state["nodes"][0]["pid"]
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for f in admin.create_topics([NewTopic("bench", 1, 1)]).values():
            f.result(30)

        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": args.compression,
                "linger.ms": 5,
                "batch.size": 1_000_000,
                "queue.buffering.max.messages": 1_000_000,
            }
        )
        payload = os.urandom(args.record_bytes // 2).hex().encode()[: args.record_bytes]
        started = time.perf_counter()
        cpu_before = cpu_seconds(pid)
        for _ in range(args.records):
            while True:
                try:
                    producer.produce("bench", payload, partition=0)
                    break
                except BufferError:
                    producer.poll(0.001)
        assert producer.flush(300) == 0
        produce_s = time.perf_counter() - started
        produce_cpu = cpu_seconds(pid) - cpu_before

        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": "bench",
                "enable.auto.commit": False,
                "fetch.max.bytes": 52_428_800,
                "max.partition.fetch.bytes": 10_485_760,
            }
        )
        consumer.assign([TopicPartition("bench", 0, 0)])
        got = 0
        started = time.perf_counter()
        cpu_before = cpu_seconds(pid)
        while got < args.records:
            for msg in consumer.consume(num_messages=10_000, timeout=1.0):
                if msg.error() is None:
                    got += 1
        consume_s = time.perf_counter() - started
        consume_cpu = cpu_seconds(pid) - cpu_before
        consumer.close()

        print(
            f"records: {args.records} x {args.record_bytes} B, idempotent, acks=all, "
            f"{args.compression}"
        )
        print(
            f"produce: {args.records / produce_s:,.0f} records/s ({produce_s:.2f} s), "
            f"node CPU {produce_cpu:.2f} s"
        )
        print(
            f"consume: {got / consume_s:,.0f} records/s ({consume_s:.2f} s), "
            f"node CPU {consume_cpu:.2f} s"
        )
        print(f"node peak RSS: {peak_rss_mib(pid):.0f} MiB")
    finally:
        cluster.down()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
