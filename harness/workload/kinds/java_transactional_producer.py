"""java_transactional_producer: a transactional_producer on the official Java client
(kafka-clients; TV2 where the cluster finalises it)."""

from __future__ import annotations

from typing import Any, Literal

from ..java_client.producer import JavaProducerClient
from ..java_client.user import JavaClientSpec, JavaUser, producer_props
from ..workers import Worker, WorkerContext
from .kind import UserKind
from .transactional_producer import TransactionalProducerSpec, TransactionalProducerWorker


class JavaTransactionalProducerSpec(JavaClientSpec, TransactionalProducerSpec):
    """A ``transactional_producer`` on the Java client: same parameters, plus
    ``kafka_clients_version`` and ``java_config``."""

    kind: Literal["java_transactional_producer"] = "java_transactional_producer"  # type: ignore[assignment]


def java_producer(
    worker: Worker, java: Any, transactional_id: str, group_id: str | None
) -> JavaProducerClient:
    """A Java producer in ``java`` with ``worker``'s settings, recording into its history."""
    return JavaProducerClient(
        java,
        producer_props(worker, transactional_id),
        worker.writer,
        call_timeout_s=worker.spec.op_timeout_s,
        reporter=worker.ctx.reporter,
        request_type=worker.request_type,
        padding_bytes=worker.spec.padding_bytes,
        group_id=group_id,
        stopping=worker.ctx.stopping,
    )


class JavaTransactionalProducerWorker(JavaUser, TransactionalProducerWorker):
    """``transactional_producer``'s transactions, on a KafkaProducer in the user's JVM."""

    request_type = "java-txn"
    spec: JavaTransactionalProducerSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)

    def open_clients(self) -> None:
        java = self.java_process()
        self.client = java_producer(self, java, self.transactional_id, None)

    def close_clients(self, abort_open: bool) -> None:
        try:
            super().close_clients(abort_open)
        finally:
            self.stop_java()


KIND = UserKind(
    spec=JavaTransactionalProducerSpec,
    worker=JavaTransactionalProducerWorker,
    prefix="java-producer",
    locust_user="JavaTransactionalProducerUser",
    crash_holds={"crash_producer": "before-commit"},
    native_client=False,  # kafka-clients runs in a JVM of its own: it cannot abort this process
)
