"""java_read_committed_consumer: a read_committed_consumer on the official Java client
(kafka-clients, the classic group protocol)."""

from __future__ import annotations

from typing import Literal

from ..java_client.consumer import JavaConsumerClient
from ..java_client.user import JavaClientSpec, JavaUser, consumer_props
from .kind import UserKind
from .read_committed_consumer import ReadCommittedConsumerSpec, ReadCommittedConsumerWorker


class JavaReadCommittedConsumerSpec(JavaClientSpec, ReadCommittedConsumerSpec):
    """A ``read_committed_consumer`` on the Java client: same parameters, plus
    ``kafka_clients_version`` and ``java_config``."""

    kind: Literal["java_read_committed_consumer"] = "java_read_committed_consumer"  # type: ignore[assignment]


class JavaReadCommittedConsumerWorker(JavaUser, ReadCommittedConsumerWorker):
    """``read_committed_consumer``'s polls and commits, on a KafkaConsumer in the user's JVM."""

    request_type = "java-consumer"
    spec: JavaReadCommittedConsumerSpec

    def open_clients(self) -> None:
        java = self.java_process()
        props = consumer_props(
            self, self.group_id, self.spec.isolation, self.spec.max_records_per_poll
        )
        client = JavaConsumerClient(
            java,
            props,
            self.writer,
            call_timeout_s=self.spec.op_timeout_s,
            reporter=self.ctx.reporter,
            request_type=self.request_type,
        )
        self.client = client  # type: ignore[assignment]
        client.on_revoked = self._dropped
        if self.spec.mode == "subscribe":
            client.subscribe(list(self.spec.topics))
        else:
            client.assign(self.start_positions())

    def step(self) -> None:
        if self.java_down:  # a dead JVM: a new one, subscribed again (its ASSIGN rewinds)
            self.close_clients(False)
            self.open_clients()
        super().step()

    def close_clients(self, abort_open: bool) -> None:
        try:
            super().close_clients(abort_open)
        finally:
            self.stop_java()


KIND = UserKind(
    spec=JavaReadCommittedConsumerSpec,
    worker=JavaReadCommittedConsumerWorker,
    prefix="java-consumer",
    locust_user="JavaReadCommittedConsumerUser",
    crash_holds={"crash_consumer": "in-poll"},
    native_client=False,  # kafka-clients runs in a JVM of its own: it cannot abort this process
)
