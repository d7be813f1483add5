"""The node's Prometheus metrics, served as text on its own HTTP port (``/metrics``).

Request counters are updated by the server after each response; per-partition
gauges are read from the partitions at scrape time (nothing to update on the hot
path). Errors per API are counted from every ``error_code`` field of a response,
top-level or per partition, so a Produce answering NOT_LEADER for one of three
partitions counts one error.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from functools import cache
from typing import Any

from kio.index import api_key_map
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, Counter, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, str(api_key))


@cache
def _error_plan(cls: type) -> tuple[tuple[str, str], ...]:
    """(field, how) for fields that hold or may contain error codes."""
    plan = []
    for f in dataclasses.fields(cls):
        kafka_type = f.metadata.get("kafka_type")
        if kafka_type == "error_code":
            plan.append((f.name, "code"))
        elif kafka_type is None or kafka_type == "":
            plan.append((f.name, "nested"))
    return tuple(plan)


def iter_error_codes(entity: Any) -> Iterator[int]:
    for name, how in _error_plan(type(entity)):
        value = getattr(entity, name)
        if how == "code":
            if value:
                yield int(value)
        elif isinstance(value, tuple):
            for item in value:
                if dataclasses.is_dataclass(item):
                    yield from iter_error_codes(item)
        elif dataclasses.is_dataclass(value):
            yield from iter_error_codes(value)


LATE_TRANSACTION_GRACE_MS = 5 * 60 * 1000  # KIP-664: max timeout + 5 minutes


class PartitionGauges(Collector):
    """Per-partition and per-broker gauges, read from the partitions at scrape time.

    Names follow Kafka's JMX metrics as the Prometheus JMX exporter renders them:
    ``kafka_log_log_*`` (LogEndOffset, LogStartOffset, Size),
    ``kafka_cluster_partition_laststableoffsetlag`` (high watermark - LSO),
    ``kafka_server_replicamanager_produceridcount`` and
    ``kafka_server_replicamanager_partitionswithlatetransactionscount`` (partitions whose
    oldest open transaction has been silent for longer than transaction.max.timeout.ms
    plus five minutes, as KIP-664 defines it).
    """

    def __init__(
        self,
        partitions: Callable[[], list[Any]],
        max_transaction_timeout_ms: int,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._partitions = partitions
        self._late_after_ms = max_transaction_timeout_ms + LATE_TRANSACTION_GRACE_MS
        self._clock_ms = clock_ms

    def collect(self) -> Iterator[GaugeMetricFamily]:
        labels = ["topic", "partition"]
        leo = GaugeMetricFamily(
            "kafka_log_log_end_offset", "Next offset to be written", labels=labels
        )
        lso = GaugeMetricFamily(
            "kafka_log_log_start_offset", "First offset still in the log", labels=labels
        )
        size = GaugeMetricFamily("kafka_log_size_bytes", "Bytes on disk", labels=labels)
        lag = GaugeMetricFamily(
            "kafka_cluster_partition_laststableoffsetlag",
            "High watermark minus last stable offset",
            labels=labels,
        )
        producers = 0
        late = 0
        now = self._clock_ms()
        for p in self._partitions():
            key = [p.topic, str(p.index)]
            leo.add_metric(key, p.log_end_offset)
            lso.add_metric(key, p.log_start_offset)
            size.add_metric(key, p.size_bytes)
            lag.add_metric(key, p.high_watermark - p.last_stable_offset)
            producers += p.producer_count
            silent_since = p.oldest_open_transaction_last_timestamp_ms
            if silent_since >= 0 and now - silent_since > self._late_after_ms:
                late += 1
        yield leo
        yield lso
        yield size
        yield lag
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_produceridcount",
            "Producer ids with state on this broker",
            value=producers,
        )
        yield GaugeMetricFamily(
            "kafka_server_replicamanager_partitionswithlatetransactionscount",
            "Partitions with an open transaction older than the maximum timeout + 5 minutes",
            value=late,
        )


class TransactionCounters(Collector):
    """The transaction coordinator's counters (started, committed, aborted, ...)."""

    def __init__(self, counters: Any) -> None:
        self._counters = counters

    def collect(self) -> Iterator[CounterMetricFamily]:
        c = self._counters
        for name, value, doc in (
            ("transactionsstarted", c.transactions_started, "Transactions begun"),
            ("transactionscommitted", c.transactions_committed, "Transactions committed"),
            ("transactionsaborted", c.transactions_aborted, "Transactions aborted (any cause)"),
            ("transactionstimedout", c.transactions_timed_out, "Aborted by their timeout"),
            ("transactionsfenced", c.transactions_fenced, "Aborted by a new producer instance"),
        ):
            yield CounterMetricFamily(f"kafka_coordinator_transaction_{name}", doc, value=value)


class NodeMetrics:
    def __init__(self, node_id: int) -> None:
        self.registry = CollectorRegistry()
        self.node_id = node_id
        self.requests = Counter(
            "txnchaos_requests",
            "Requests answered, per API",
            ["api"],
            registry=self.registry,
        )
        self.errors = Counter(
            "txnchaos_request_errors",
            "Error codes returned, per API and error",
            ["api", "error"],
            registry=self.registry,
        )
        self.request_seconds = Counter(
            "txnchaos_request_seconds",
            "Time spent handling requests, per API",
            ["api"],
            registry=self.registry,
        )
        self.bytes_in = Counter(
            "txnchaos_bytes_in", "Request bytes received", registry=self.registry
        )
        self.bytes_out = Counter(
            "txnchaos_bytes_out", "Response bytes sent", registry=self.registry
        )
        self.port: int | None = None
        self._server: Any = None

    def add_collector(self, collector: Collector) -> None:
        self.registry.register(collector)

    def observe(
        self,
        api_key: int,
        api_version: int,
        response: Any,
        seconds: float,
        bytes_in: int,
        bytes_out: int,
    ) -> None:
        name = api_name(api_key)
        self.requests.labels(name).inc()
        self.request_seconds.labels(name).inc(seconds)
        self.bytes_in.inc(bytes_in)
        self.bytes_out.inc(bytes_out)
        if response is not None:
            for code in iter_error_codes(response):
                try:
                    error = ErrorCode(code).name
                except ValueError:
                    error = str(code)
                self.errors.labels(name, error).inc()

    def serve(self, host: str, port: int) -> int:
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        self.port = self._server.server_port
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
