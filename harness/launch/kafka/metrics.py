"""Apache Kafka's JMX metrics as Prometheus text, under the names the project's nodes use.

Every broker JVM runs the Prometheus JMX exporter java agent
(``io.prometheus.jmx:jmx_prometheus_javaagent``, from Maven) with the rules below, on a
port of its own (``NodeInfo.metrics_url``). The rules read only the MBeans the metrics
checker and the report use, and name them as the project's nodes expose them
(``cluster/metrics.py``), so the scraper, the compaction (which maps any spelling onto
the canonical names) and both checker engines read Kafka's nodes as they read ours:

* ``kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount`` and
  ``name=ProducerIdCount``: ``kafka_server_replicamanager_<name>`` (gauges);
* ``kafka.cluster:type=Partition,name=LastStableOffsetLag,topic=T,partition=P`` (not the
  internal ``__`` topics): ``kafka_cluster_partition_laststableoffsetlag{topic,partition}``;
* ``kafka.coordinator.transaction:type=TransactionMarkerChannelManager,name=X``:
  ``kafka_coordinator_transaction_transactionmarkerchannelmanager_<x>``;
* ``kafka.server:type=AddPartitionsToTxnManager``: ``VerificationTimeMs``'s count and
  ``VerificationFailureRate``'s count (``..._verificationtimems_count``,
  ``..._verificationfailurerate_total``);
* ``kafka.server:type=transaction-coordinator-metrics``: its attributes as
  ``kafka_server_transaction_coordinator_metrics_<attribute>``;
* ``kafka.network:type=RequestMetrics,name=RequestsPerSec|ErrorsPerSec`` of the transactional
  APIs (Produce, AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, TxnOffsetCommit,
  WriteTxnMarkers, InitProducerId): ``kafka_network_requestmetrics_requests_total{request,
  version}`` and ``..._errors_total{request,error}`` (``error="NONE"`` counts the successes).

Kafka has no counters of committed and aborted transactions (the project's
``TransactionsCommitted``/``TransactionsAborted``): :data:`UNAVAILABLE` says so, and the
launcher puts it in ``run.json`` so the metrics checker says ``unknown`` with that reason
instead of judging without them.
"""

from __future__ import annotations

from ....rundir.schema import MetricName

#: metrics the checker reads that no Apache Kafka release exposes, and why
UNAVAILABLE = {
    MetricName.TXNS_COMMITTED.value: "Apache Kafka counts no committed transactions "
    "(no such MBean in its transaction coordinator)",
    MetricName.TXNS_ABORTED.value: "Apache Kafka counts no aborted transactions "
    "(no such MBean in its transaction coordinator)",
}

EXPORTER_CONFIG = r"""# Prometheus JMX exporter rules (txnchaos: harness/launch/kafka/metrics.py)
lowercaseOutputName: true
lowercaseOutputLabelNames: true
includeObjectNames:
  - "kafka.server:type=ReplicaManager,name=PartitionsWithLateTransactionsCount"
  - "kafka.server:type=ReplicaManager,name=ProducerIdCount"
  - "kafka.cluster:type=Partition,name=LastStableOffsetLag,*"
  - "kafka.coordinator.transaction:type=TransactionMarkerChannelManager,*"
  - "kafka.server:type=AddPartitionsToTxnManager,*"
  - "kafka.server:type=transaction-coordinator-metrics,*"
  - "kafka.network:type=RequestMetrics,name=RequestsPerSec,*"
  - "kafka.network:type=RequestMetrics,name=ErrorsPerSec,*"
rules:
  - pattern: 'kafka.server<type=ReplicaManager, name=(PartitionsWithLateTransactionsCount|ProducerIdCount)><>Value'
    name: kafka_server_replicamanager_$1
    type: GAUGE
  - pattern: 'kafka.cluster<type=Partition, name=LastStableOffsetLag, topic=((?!__).+), partition=(\d+)><>Value'
    name: kafka_cluster_partition_laststableoffsetlag
    labels:
      topic: "$1"
      partition: "$2"
    type: GAUGE
  - pattern: 'kafka.coordinator.transaction<type=TransactionMarkerChannelManager, name=(\w+)><>Value'
    name: kafka_coordinator_transaction_transactionmarkerchannelmanager_$1
    type: GAUGE
  - pattern: 'kafka.server<type=AddPartitionsToTxnManager, name=VerificationTimeMs><>Count'
    name: kafka_server_addpartitionstotxnmanager_verificationtimems_count
    type: GAUGE
  - pattern: 'kafka.server<type=AddPartitionsToTxnManager, name=VerificationFailureRate><>Count'
    name: kafka_server_addpartitionstotxnmanager_verificationfailurerate
    type: COUNTER
  - pattern: 'kafka.server<type=transaction-coordinator-metrics><>([\w-]+)'
    name: kafka_server_transaction_coordinator_metrics_$1
    type: GAUGE
  - pattern: 'kafka.network<type=RequestMetrics, name=RequestsPerSec, request=(Produce|AddPartitionsToTxn|AddOffsetsToTxn|EndTxn|TxnOffsetCommit|WriteTxnMarkers|InitProducerId), version=(\d+)><>Count'
    name: kafka_network_requestmetrics_requests_total
    labels:
      request: "$1"
      version: "$2"
    type: COUNTER
  - pattern: 'kafka.network<type=RequestMetrics, name=ErrorsPerSec, request=(Produce|AddPartitionsToTxn|AddOffsetsToTxn|EndTxn|TxnOffsetCommit|WriteTxnMarkers|InitProducerId), error=(\w+)><>Count'
    name: kafka_network_requestmetrics_errors_total
    labels:
      request: "$1"
      error: "$2"
    type: COUNTER
"""  # noqa: E501 (the rules are one pattern a line)
