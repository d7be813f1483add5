"""tv2_producer: a transactional_producer on our own client (``harness/clients``), which
speaks KIP-890's new protocol (TV2) where the cluster offers it."""

from __future__ import annotations

from typing import Literal

from ..recording import RecordingProducer
from ..spec import TransactionVersion
from ..workers import Worker
from .kind import UserKind
from .transactional_producer import TransactionalProducerSpec, TransactionalProducerWorker


class Tv2ProducerSpec(TransactionalProducerSpec):
    """A transactional producer on our own client (``harness/clients``), which speaks
    KIP-890's new protocol (TV2). Same parameters as ``transactional_producer`` (``client_config``
    is not used: it holds librdkafka properties), plus ``transaction_version``."""

    kind: Literal["tv2_producer"] = "tv2_producer"  # type: ignore[assignment]
    transaction_version: TransactionVersion = None


def our_producer(worker: Worker, transactional_id: str, group_id: str | None) -> RecordingProducer:
    """An :class:`~..ours.OurProducerClient` with the worker's settings (imported here: only
    the workers on our client need it)."""
    from ..ours import OurProducerClient, our_config

    return OurProducerClient(
        our_config(worker.producer_conf(transactional_id), worker.spec.transaction_version),
        worker.writer,
        reporter=worker.ctx.reporter,
        request_type=worker.request_type,
        padding_bytes=worker.spec.padding_bytes,
        group_id=group_id,
    )


class Tv2ProducerWorker(TransactionalProducerWorker):
    """``transactional_producer`` on our own client: TV2 where the cluster offers it."""

    request_type = "tv2"

    def open_clients(self) -> None:
        self.client = our_producer(self, self.transactional_id, None)


KIND = UserKind(
    spec=Tv2ProducerSpec,
    worker=Tv2ProducerWorker,
    prefix="tv2-producer",
    locust_user="Tv2ProducerUser",
    crash_holds={"crash_producer": "before-commit"},
)
