"""The node's Prometheus metrics, served as text on its own HTTP port (``/metrics``).

Request counters are plain numbers the server bumps after each response (a
prometheus ``Counter`` with labels costs a lock and a label lookup per request),
exported by a collector at scrape time; per-partition gauges are read from the
partitions at scrape time too. Errors per API are counted from every ``error_code``
field of a response, top-level or per partition, so a Produce answering NOT_LEADER
for one of three partitions counts one error.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator
from typing import Any

from kio.index import api_key_map
from kio.schema.errors import ErrorCode
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily
from prometheus_client.registry import Collector

from .protocol.codec import EncodedResponse, per_class


def api_name(api_key: int) -> str:
    return api_key_map.get(api_key, str(api_key))


@per_class
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


LATE_TRANSACTION_GRACE_MS = 5 * 60 * 1000  # KIP-664: max timeout + 5 minutes (the default)


class PartitionGauges(Collector):
    """Per-partition and per-broker gauges, read from the partitions at scrape time.

    Names follow Kafka's JMX metrics as the Prometheus JMX exporter renders them:
    ``kafka_log_log_*`` (LogEndOffset, LogStartOffset, Size),
    ``kafka_cluster_partition_laststableoffsetlag`` (high watermark - LSO),
    ``kafka_server_replicamanager_produceridcount`` and
    ``kafka_server_replicamanager_partitionswithlatetransactionscount`` (partitions with
    an open transaction that has run longer than transaction.max.timeout.ms plus a
    padding, five minutes by default: KIP-664's definition, measured from the timestamp
    of the batch that opened the transaction; Kafka approximates it with the last
    timestamp of the oldest transaction's producer).
    """

    def __init__(
        self,
        partitions: Callable[[], list[Any]],
        max_transaction_timeout_ms: int,
        late_padding_ms: int = LATE_TRANSACTION_GRACE_MS,
        clock_ms: Callable[[], int] = lambda: int(time.time() * 1000),
    ) -> None:
        self._partitions = partitions
        self._late_after_ms = max_transaction_timeout_ms + late_padding_ms
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
            started = p.longest_open_transaction_start_ms
            if started >= 0 and now - started > self._late_after_ms:
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
            "Partitions with an open transaction older than the maximum timeout + padding",
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


class TransactionOpenTimeGauge(Collector):
    """KIP-939's ``kafka.server:type=transaction-coordinator-metrics,
    name=active-transaction-open-time-max``: how long the oldest transaction still open
    at this coordinator has been open (ms; 0 when none is). 2PC transactions never time
    out, so this is how an operator sees one left prepared."""

    def __init__(self, open_time_max_ms: Callable[[], int]) -> None:
        self._open_time_max_ms = open_time_max_ms

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "kafka_server_transaction_coordinator_metrics_active_transaction_open_time_max",
            "Milliseconds the longest currently-open transaction has been open",
            value=self._open_time_max_ms(),
        )


class TransactionMarkerGauges(Collector):
    """The coordinator's marker queue: Kafka's
    ``kafka.coordinator.transaction:type=TransactionMarkerChannelManager,
    name=UnknownDestinationQueueSize`` (markers whose partition has no known leader), and
    every marker not written yet (a transaction stuck in PrepareCommit/PrepareAbort
    shows here before it shows as a late transaction on a broker)."""

    def __init__(self, markers: Any) -> None:
        self._markers = markers

    def collect(self) -> Iterator[GaugeMetricFamily]:
        yield GaugeMetricFamily(
            "kafka_coordinator_transaction_transactionmarkerchannelmanager_unknowndestinationqueuesize",
            "Transaction markers waiting for their partition's leader to be known",
            value=self._markers.unknown_destination,
        )
        yield GaugeMetricFamily(
            "txnchaos_transaction_markers_pending",
            "Transaction markers not written yet (queued, backing off or in flight)",
            value=self._markers.queued,
        )


class VerificationMetrics(Collector):
    """KIP-890 part 1 on a broker, under Kafka's names (AddPartitionsToTxnManager):
    VerificationTimeMs (a histogram in Kafka; count and sum here) and
    VerificationFailureRate (a meter in Kafka; its count here)."""

    def __init__(self, stats: Any) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Any]:
        s = self._stats
        yield SummaryMetricFamily(
            "kafka_server_addpartitionstotxnmanager_verificationtimems",
            "Milliseconds from a verification's start to its answer",
            count_value=s.time_ms_count,
            sum_value=s.time_ms_sum,
        )
        yield CounterMetricFamily(
            "kafka_server_addpartitionstotxnmanager_verificationfailurerate",
            "Partitions whose verification failed",
            value=s.failures,
        )


class _RequestCollector(Collector):
    """Exposes the request counters that :class:`NodeMetrics` keeps as plain numbers."""

    def __init__(self, metrics: NodeMetrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[CounterMetricFamily]:
        m = self._m
        per_api = list(m._per_api.items())  # atomic copies (the loop thread updates)
        errors = list(m._errors.items())
        requests = CounterMetricFamily(
            "txnchaos_requests", "Requests answered, per API", labels=["api"]
        )
        seconds = CounterMetricFamily(
            "txnchaos_request_seconds", "Time spent handling requests, per API", labels=["api"]
        )
        for api_key, (count, secs) in sorted(per_api):
            requests.add_metric([api_name(api_key)], count)
            seconds.add_metric([api_name(api_key)], secs)
        failed = CounterMetricFamily(
            "txnchaos_request_errors",
            "Error codes returned, per API and error",
            labels=["api", "error"],
        )
        for (api_key, code), count in sorted(errors):
            failed.add_metric([api_name(api_key), _error_name(code)], count)
        yield requests
        yield failed
        yield seconds
        yield CounterMetricFamily("txnchaos_bytes_in", "Request bytes received", value=m._bytes_in)
        yield CounterMetricFamily("txnchaos_bytes_out", "Response bytes sent", value=m._bytes_out)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class NodeMetrics:
    """Request counters (per API, per error), kept as plain numbers on the event loop
    (the server calls :meth:`observe` for every request) and exported at scrape time."""

    def __init__(self, node_id: int) -> None:
        self.registry = CollectorRegistry()
        self.node_id = node_id
        self._per_api: dict[int, list[float]] = {}  # api key -> [requests, seconds]
        self._errors: dict[tuple[int, int], int] = {}  # (api key, error code) -> count
        self._bytes_in = 0
        self._bytes_out = 0
        self.registry.register(_RequestCollector(self))
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
        stats = self._per_api.get(api_key)
        if stats is None:
            stats = self._per_api[api_key] = [0, 0.0]
        stats[0] += 1
        stats[1] += seconds
        self._bytes_in += bytes_in
        self._bytes_out += bytes_out
        if response is None:
            return
        codes = (
            response.error_codes
            if type(response) is EncodedResponse
            else iter_error_codes(response)
        )
        errors = self._errors
        for code in codes:
            if code:
                key = (api_key, code)
                errors[key] = errors.get(key, 0) + 1

    def requests_served(self, api_key: int) -> int:
        """Requests answered so far for one API (tests)."""
        stats = self._per_api.get(api_key)
        return 0 if stats is None else int(stats[0])

    def serve(self, host: str, port: int) -> int:
        self._server, _ = start_http_server(port, addr=host, registry=self.registry)
        self.port = self._server.server_port
        return self.port

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
