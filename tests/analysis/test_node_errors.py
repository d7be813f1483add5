"""Node errors: an exception that escaped a txnchaos node's code, read from the node's log,
is a ``node_error`` finding of the verdict (both engines), one per type and place; errors of
the environment (connections, disks, a cancelled task at shutdown) are not; Apache Kafka's logs
are not read."""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis import analyze as engines
from txnchaos.analysis.findings import finding_line
from txnchaos.analysis.spark.pipeline import analyze as spark_analyze
from txnchaos.rundir.node_errors import (
    is_environment,
    read_node_errors,
    scan_java_log,
    scan_log,
)
from txnchaos_testing.synthetic import Synth, SynthConfig

from .engine_support import EXAMPLES, assert_same_verdict

CANCELLED_AT_STOP = """\
2026-11-28 18:05:37,582 node-1001 INFO txnchaos.cluster.node: node 1001 stopping
2026-11-28 18:05:37,681 node-1001 ERROR asyncio: Exception in callback _Suspended._resume()
Traceback (most recent call last):
  File "/usr/lib/python3.11/asyncio/events.py", line 80, in _run
    self._context.run(self._callback, *self._args)
  File "/x/txnchaos/cluster/controller/controller.py", line 339, in wait_for_change
    await asyncio.wait_for(self._changed.wait(), timeout)
asyncio.exceptions.CancelledError
"""

LOOP_CLOSED_AT_EXIT = """\
Exception ignored in: <coroutine object PeerConnection.request at 0x7f9f448eb760>
Traceback (most recent call last):
  File "/x/txnchaos/cluster/net/client.py", line 314, in request
    async with self._lock:
  File "/usr/lib/python3.11/asyncio/base_events.py", line 519, in _check_closed
    raise RuntimeError('Event loop is closed')
RuntimeError: Event loop is closed
"""

FULL_DISK = """\
2026-11-28 18:05:38,000 node-2 ERROR txnchaos.cluster.coordinator.groups.offsets: group g: \
could not persist offsets
Traceback (most recent call last):
  File "/x/txnchaos/cluster/storage/log.py", line 210, in append
    fh.write(data)
OSError: [Errno 28] No space left on device
2026-11-28 18:05:39,000 node-2 ERROR txnchaos.cluster.coordinator.transactions.coordinator: \
cannot fence epoch MAX to time out its transaction
"""

RECOVERY_BUG = """\
2026-11-28 18:06:01,250 node-2 INFO txnchaos.cluster.broker.partition_manager: opening events-1
2026-11-28 18:06:01,300 node-2 ERROR txnchaos.cluster.broker.partition_manager: cannot open \
events-1
Traceback (most recent call last):
  File "/x/txnchaos/cluster/broker/partition_manager.py", line 150, in sync
    await self._open(key, topic_id)
  File "/x/txnchaos/cluster/storage/log.py", line 153, in _load
    batch = read_batch(fh)
  File "/x/txnchaos/cluster/protocol/record_batch.py", line 88, in read_batch
    raise CorruptBatch("crc mismatch")
txnchaos.cluster.protocol.record_batch.CorruptBatch: crc mismatch
2026-11-28 18:06:01,310 node-2 INFO txnchaos.cluster.broker.partition_manager: opened events-2
"""

THREAD_BUG = """\
2026-11-28 22:47:14,349 node-1 INFO txnchaos.cluster.broker.partition_manager: opened copies-0
Traceback (most recent call last):
  File "/usr/lib/python3.11/wsgiref/handlers.py", line 137, in run
    self.result = application(self.environ, self.start_response)
  File "/x/txnchaos/cluster/metrics.py", line 110, in collect
    started = p.longest_open_transaction_start_ms
  File "/x/txnchaos/cluster/broker/producer_state.py", line 228, in <listcomp>
    starts = [
             ^
RuntimeError: dictionary changed size during iteration
"""

CHAINED = """\
2026-11-28 18:07:00,000 node-1001 ERROR txnchaos.cluster.coordinator.transactions.marker_sender: \
marker completion callback failed for tx-1
Traceback (most recent call last):
  File "/x/txnchaos/cluster/coordinator/transactions/state.py", line 40, in complete
    pending = self.pending[pid]
KeyError: 7

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "/x/txnchaos/cluster/coordinator/transactions/marker_sender.py", line 570, in _done
    unit.callback()
  File "/x/txnchaos/cluster/coordinator/transactions/state.py", line 44, in complete
    assert pid in self.done, pid
AssertionError: 7
"""


def test_the_environment_is_not_a_node_error() -> None:
    assert scan_log(CANCELLED_AT_STOP + FULL_DISK + LOOP_CLOSED_AT_EXIT, "node-2") == []
    # a traceback printed at exit right after a logged one is a block of its own
    assert scan_log(CANCELLED_AT_STOP + LOOP_CLOSED_AT_EXIT, "node-1001") == []
    for name in (
        "ConnectionResetError",
        "txnchaos.cluster.net.client.PeerUnavailable",
        "asyncio.exceptions.TimeoutError",
        "OSError",
    ):
        assert is_environment(name), name
    assert not is_environment("txnchaos.cluster.protocol.record_batch.CorruptBatch")
    assert not is_environment("KeyError")


def test_an_exception_in_the_nodes_code_is_found_with_its_place_and_line() -> None:
    (e,) = scan_log(RECOVERY_BUG, "node-2")
    assert e.exception == "txnchaos.cluster.protocol.record_batch.CorruptBatch"
    assert e.detail == "crc mismatch"
    assert e.where == "protocol/record_batch.py:88 in read_batch"
    assert e.message == "cannot open events-1"
    assert e.node == "node-2" and e.time_s is not None


def test_a_bare_traceback_of_a_thread_and_a_chained_one_are_found() -> None:
    (bare,) = scan_log(THREAD_BUG, "node-1")
    assert bare.exception == "RuntimeError" and bare.message is None
    assert bare.where == "broker/producer_state.py:228 in <listcomp>"
    (chained,) = scan_log(CHAINED, "node-1001")
    # the exception that escaped is the last one; its place is in the last traceback
    assert chained.exception == "AssertionError" and chained.detail == "7"
    assert chained.where == "coordinator/transactions/state.py:44 in complete"


def _run_with_logs(tmp_path: Path, logs: dict[str, str], flavour: str = "txnchaos") -> Path:
    synth = Synth(SynthConfig(seed=3, txns_per_writer=5, consumers=1, copiers=False)).build()
    run = synth.write(tmp_path / "run")
    info = json.loads((run / "run.json").read_text())
    info["cluster"] = {"flavour": flavour, "launcher": "local", "transaction_version": 2}
    (run / "run.json").write_text(json.dumps(info))
    for node, text in logs.items():
        (run / "cluster" / node).mkdir(parents=True)
        (run / "cluster" / node / "node.log").write_text(text)
    return run


def test_node_errors_are_findings_of_the_verdict_in_both_engines(
    spark: SparkSession, tmp_path: Path
) -> None:
    # the same bug on two nodes, twice on one: one finding, counted; the stop noise: none
    run = _run_with_logs(
        tmp_path,
        {
            "node-1": CANCELLED_AT_STOP + RECOVERY_BUG.replace("node-2", "node-1"),
            "node-2": RECOVERY_BUG + RECOVERY_BUG + FULL_DISK,
        },
    )
    errors, note = read_node_errors(run)
    assert note is None and len(errors) == 1 and errors[0].count == 3
    assert errors[0].nodes == ["node-1", "node-2"]

    want = spark_analyze(run, spark=spark, examples=EXAMPLES, write=False)
    have = engines.analyze(run, engine="reference", examples=EXAMPLES, write=False)
    assert_same_verdict(want, have)
    (f,) = have.findings
    assert have.status == "valid" and have.exit_code == 1
    assert f["kind"] == "node_error" and f["count"] == 3
    line = finding_line(f)
    assert line.startswith("node error: node-1, node-2 at +")
    assert "(3 times): txnchaos.cluster.protocol.record_batch.CorruptBatch: crc mismatch" in line
    assert "in protocol/record_batch.py:88 in read_batch" in line
    assert "1 FINDING (node error)" in have.summary().splitlines()[0]


KAFKA_END_TXN = """\
2026-11-28T21:46:52.973 [data-plane-kafka-request-handler-2] ERROR kafka.server.KafkaApis - \
[KafkaApi-2] Unexpected error handling request RequestHeader(apiKey=END_TXN, apiVersion=5)
java.lang.IllegalStateException: Preparing transaction state transition to ONGOING while it \
already a pending state PREPARE_EPOCH_FENCE
\tat org.apache.kafka.coordinator.transaction.TransactionMetadata.prepareTransitionTo(\
TransactionMetadata.java:321)
\tat scala.util.Either.flatMap(Either.scala:360)
\tat kafka.server.KafkaApis.handle(KafkaApis.scala:197)
\tat java.base/java.lang.Thread.run(Thread.java:840)
"""

KAFKA_REFUSALS = """\
2026-11-29T00:48:32.400 [data-plane-kafka-request-handler-7] ERROR kafka.server.ReplicaManager - \
[ReplicaManager broker=2] Error processing append operation on partition events-3
org.apache.kafka.common.errors.OutOfOrderSequenceException: Out of order sequence number
2026-11-29T00:48:33.000 [kafka-shutdown-hook] ERROR org.apache.kafka.coordinator.common.runtime.\
CoordinatorRuntime - Failed to load metadata from __consumer_offsets-28
java.lang.RuntimeException: Coordinator loader is closed.
\tat org.apache.kafka.coordinator.common.runtime.CoordinatorLoaderImpl.doLoad(\
CoordinatorLoaderImpl.java:166)
SEVERE: The Prometheus metrics HTTPServer caught an Exception
java.lang.IllegalStateException: not Kafka's
\tat io.prometheus.jmx.Exporter.send(Exporter.java:10)
"""


def test_kafka_logs_give_its_programming_errors_only() -> None:
    """A refusal (OutOfOrderSequenceException), a shutdown's RuntimeException and an
    exception of the metrics agent's own code are not Kafka's bugs; an
    IllegalStateException thrown from Kafka's transaction coordinator is."""
    assert scan_java_log(KAFKA_REFUSALS, "node-2") == []
    (e,) = scan_java_log(KAFKA_END_TXN, "node-2")
    assert e.exception == "java.lang.IllegalStateException"
    assert e.detail.endswith("already a pending state PREPARE_EPOCH_FENCE")
    assert e.where == (
        "org.apache.kafka.coordinator.transaction.TransactionMetadata.prepareTransitionTo("
        "TransactionMetadata.java:321)"
    )
    assert e.message is not None and e.message.startswith("[KafkaApi-2] Unexpected error")


def test_each_flavour_reads_its_own_log_format(tmp_path: Path) -> None:
    kafka = _run_with_logs(tmp_path / "k", {"node-1": RECOVERY_BUG}, flavour="apache-kafka")
    v = engines.analyze(kafka, engine="reference", write=False)
    assert v.findings == [] and v.exit_code == 0  # a Python traceback in a Kafka run: not read
    kafka = _run_with_logs(tmp_path / "k2", {"node-2": KAFKA_END_TXN}, flavour="apache-kafka")
    (f,) = engines.analyze(kafka, engine="reference", write=False).findings
    assert f["kind"] == "node_error" and f["exception"] == "java.lang.IllegalStateException"
    external = _run_with_logs(tmp_path / "x", {"node-2": KAFKA_END_TXN}, flavour="external")
    assert read_node_errors(external, "external") == ([], None)


def test_the_report_shows_a_node_error(tmp_path: Path) -> None:
    run = _run_with_logs(tmp_path, {"node-2": RECOVERY_BUG})
    v = engines.analyze(run, engine="reference", write=True)
    assert v.exit_code == 1
    page = (run / "report.html").read_text()
    assert "<b>Node error</b>" in page
    assert "CorruptBatch: crc mismatch</code> in <code>protocol/record_batch.py:88" in page
    assert "<code>cluster/node-2/node.log</code>" in page
