"""Run by test_java_kinds.py in its own process: a Java producer and a Java consumer as two
greenlets of a locust-patched process (``import locust`` patches it with gevent, as in the
workload runner), until the consumer has made ``--long-polls`` polls of an empty topic after
the producer's first commit. Args: config JSON path, bootstrap, run directory."""

import locust  # noqa: F401, I001  (first: gevent's monkey-patching, as in the runner)

import argparse
import json
import time
from pathlib import Path

import gevent

from txnchaos.harness.workload.config import load_workload
from txnchaos.harness.workload.kinds.java_read_committed_consumer import (
    JavaReadCommittedConsumerWorker,
)
from txnchaos.harness.workload.kinds.java_transactional_producer import (
    JavaTransactionalProducerWorker,
)
from txnchaos.harness.workload.workers import WorkerContext


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("config", type=Path)
    ap.add_argument("bootstrap")
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--long-polls", type=int, default=3)
    ap.add_argument("--deadline-s", type=float, default=150.0)
    args = ap.parse_args()
    cfg = load_workload(json.loads(args.config.read_text()))
    ctx = WorkerContext(config=cfg, run_dir=args.run_dir, bootstrap=args.bootstrap, seed=1)
    producer = JavaTransactionalProducerWorker(cfg.users[0], ctx, "java-producer-0", 0)
    consumer = JavaReadCommittedConsumerWorker(cfg.users[1], ctx, "java-consumer-0", 0)
    done = False
    committed = 0

    def produce() -> None:
        nonlocal committed
        producer.start()
        while not done:
            producer.step()
            committed += 1

    def consume() -> None:
        nonlocal done
        consumer.start()
        polls = 0
        deadline = time.monotonic() + args.deadline_s
        while polls < args.long_polls and time.monotonic() < deadline:
            consumer.step()
            if committed:
                polls += 1
        done = True

    gevent.joinall([gevent.spawn(produce), gevent.spawn(consume)], raise_error=True)
    producer.stop()
    consumer.stop()


if __name__ == "__main__":
    main()
