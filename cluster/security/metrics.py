"""Authentication counters with the names of Kafka's socket-server metrics."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from .authentication import Authenticator

PREFIX = "kafka_server_socket_server_metrics_"


class AuthenticationMetrics(Collector):
    def __init__(self, authenticator: Authenticator) -> None:
        self.authenticator = authenticator

    def collect(self) -> Iterator[CounterMetricFamily]:
        a = self.authenticator
        yield CounterMetricFamily(
            f"{PREFIX}successful_authentication",
            "Connections that completed SASL authentication",
            value=a.successes,
        )
        yield CounterMetricFamily(
            f"{PREFIX}failed_authentication",
            "SASL authentications refused (wrong credentials or mechanism)",
            value=a.failures,
        )
