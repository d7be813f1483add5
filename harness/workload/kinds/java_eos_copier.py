"""java_eos_copier: an eos_copier on the official Java client, its consumer and its producer
in one JVM (the producer sends the offsets with that consumer's group metadata, KIP-447)."""

from __future__ import annotations

from typing import Literal

from ..java_client.consumer import JavaConsumerClient
from ..java_client.user import JavaClientSpec, JavaUser, consumer_props
from ..recording import RecordingProducer
from .eos_copier import EOSCopierSpec, EOSCopierWorker
from .java_transactional_producer import java_producer
from .kind import UserKind


class JavaEOSCopierSpec(JavaClientSpec, EOSCopierSpec):
    """An ``eos_copier`` on the Java client: same parameters, plus ``kafka_clients_version``
    and ``java_config``."""

    kind: Literal["java_eos_copier"] = "java_eos_copier"  # type: ignore[assignment]


class JavaEOSCopierWorker(JavaUser, EOSCopierWorker):
    """``eos_copier``'s consume-transform-produce on a KafkaConsumer and a KafkaProducer."""

    request_type = "java-copier"
    spec: JavaEOSCopierSpec

    def _new_producer(self) -> RecordingProducer:
        return java_producer(self, self.java_process(), self.transactional_id, self.group_id)

    def open_clients(self) -> None:
        java = self.java_process()
        self.producer = self._new_producer()
        consumer = JavaConsumerClient(
            java,
            consumer_props(self, self.group_id, "read_committed", self.spec.max_records_per_txn),
            self.writer,
            call_timeout_s=self.spec.op_timeout_s,
            reporter=self.ctx.reporter,
            request_type=self.request_type,
        )
        self.consumer = consumer  # type: ignore[assignment]
        consumer.subscribe(list(self.spec.input_topics))

    def _reopen(self) -> None:
        self.close_clients(False)
        self.open_clients()

    def reset_producer(self) -> None:
        if self.java_down:  # the consumer died with the JVM: both start again
            self._reopen()
            return
        super().reset_producer()

    def step(self) -> None:
        if self.java_down:
            self._reopen()
        super().step()

    def rewind(self) -> bool:
        """Seek every assigned partition back to the group's committed offset (SEEK op)."""
        consumer = self.consumer
        if isinstance(consumer, JavaConsumerClient) and consumer.open:
            return consumer.rewind(self.spec.op_timeout_s)
        return True  # no consumer: the next one starts from the committed offsets

    def close_clients(self, abort_open: bool) -> None:
        try:
            super().close_clients(abort_open)
        finally:
            self.stop_java()


KIND = UserKind(
    spec=JavaEOSCopierSpec,
    worker=JavaEOSCopierWorker,
    prefix="java-copier",
    locust_user="JavaEOSCopierUser",
    crash_holds={"crash_consumer": "in-poll"},
    native_client=False,  # kafka-clients runs in a JVM of its own: it cannot abort this process
)
