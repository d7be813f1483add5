"""tv2_producer: a transactional_producer on our own client (``harness/clients``), which
speaks KIP-890's new protocol (TV2) where the cluster offers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from pydantic import Field

from ..recording import RecordingProducer
from ..spec import SpecModel, TransactionVersion
from ..workers import Worker
from .kind import UserKind
from .transactional_producer import TransactionalProducerSpec, TransactionalProducerWorker

if TYPE_CHECKING:
    from ...clients.config import ProducerConfig


class MisbehaviorSpec(SpecModel):
    """Deliberate client bugs (``harness/clients/config.py`` ``Misbehavior``), for the
    reproductions of what KIP-890's defenses are for. They act under the old protocol
    (transaction.version 0/1) only: under TV2 the broker adds partitions itself."""

    add_partitions: Literal["before", "after", "never"] = Field(
        default="before",
        description="before: correct; after: write first, add once acknowledged; never: "
        "write without AddPartitionsToTxn",
    )
    skip_epoch_bump: bool = Field(
        default=False, description="no KIP-360 epoch bump after an abortable error"
    )


class Tv2ProducerSpec(TransactionalProducerSpec):
    """A transactional producer on our own client (``harness/clients``), which speaks
    KIP-890's new protocol (TV2). Same parameters as ``transactional_producer`` (``client_config``
    is not used: it holds librdkafka properties), plus ``transaction_version`` and
    ``misbehavior``."""

    kind: Literal["tv2_producer"] = "tv2_producer"  # type: ignore[assignment]
    transaction_version: TransactionVersion = None
    misbehavior: MisbehaviorSpec = Field(default_factory=MisbehaviorSpec)


def our_producer_config(worker: Worker, transactional_id: str) -> ProducerConfig:
    """Our producer's settings for a worker: its librdkafka-style properties, its
    transaction version and, for a ``tv2_producer``, its deliberate misbehaviour."""
    from ...clients.config import Misbehavior
    from ..ours import our_config

    wrong = getattr(worker.spec, "misbehavior", None)
    extra = {"misbehavior": Misbehavior(**wrong.model_dump())} if wrong is not None else {}
    conf = worker.producer_conf(transactional_id)
    return our_config(conf, worker.spec.transaction_version, **extra)


def our_producer(worker: Worker, transactional_id: str, group_id: str | None) -> RecordingProducer:
    """An :class:`~..ours.OurProducerClient` with the worker's settings (imported here: only
    the workers on our client need it)."""
    from ..ours import OurProducerClient

    return OurProducerClient(
        our_producer_config(worker, transactional_id),
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
