"""tv2_producer: a transactional_producer on our own client (``harness/clients``), which
speaks KIP-890's new protocol (TV2) where the cluster offers it."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import Field

from ....rundir.schema import Outcome
from ..recording import RecordingProducer
from ..spec import SpecModel, TransactionVersion
from ..workers import Worker, WorkerContext
from .kind import UserKind
from .transactional_producer import TransactionalProducerSpec, TransactionalProducerWorker

if TYPE_CHECKING:
    from ...clients.config import ProducerConfig
    from ..config import WorkloadConfig
    from ..ours import OurProducerClient


LateRequest = Literal["none", "produce_after_abort", "produce_into_next", "end_txn_into_next"]


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
    late_request: LateRequest = Field(
        default="none",
        description="KIP-890's late requests (harness/workload/late_requests.py): "
        "produce_after_abort, produce_into_next or end_txn_into_next; none: correct",
    )
    late_every: Annotated[int, Field(ge=1)] = Field(
        default=2, description="every n-th transaction pair is a late-request one"
    )

    def client_misbehavior(self) -> dict[str, object]:
        """The fields the client itself takes (``Misbehavior``); late requests are the
        worker's."""
        return self.model_dump(include={"add_partitions", "skip_epoch_bump"})


class Tv2ProducerSpec(TransactionalProducerSpec):
    """A transactional producer on our own client (``harness/clients``), which speaks
    KIP-890's new protocol (TV2). Same parameters as ``transactional_producer`` (of
    ``client_config``'s librdkafka properties it takes ``client.id``, ``linger.ms`` and the
    SASL keys), plus ``transaction_version`` and ``misbehavior``."""

    kind: Literal["tv2_producer"] = "tv2_producer"  # type: ignore[assignment]
    transaction_version: TransactionVersion = None
    misbehavior: MisbehaviorSpec = Field(default_factory=MisbehaviorSpec)
    reinitializations: int = Field(
        default=0,
        ge=0,
        le=32_767,
        description="InitProducerId this many times more at init, as that many restarts "
        "would: each bumps the epoch by one (32,766 reach the last usable epoch, as 32,766 "
        "transactions do under TV2); sent 256 at a time on the coordinator's connection",
    )

    def problem_in(self, config: WorkloadConfig) -> str | None:
        total = sum(config.partitions(t) for t in self.topics)
        if self.misbehavior.late_request == "end_txn_into_next" and total < 2:
            return f"late_request end_txn_into_next needs 2 partitions; {self.topics} have {total}"
        return super().problem_in(config)


def our_producer_config(worker: Worker, transactional_id: str) -> ProducerConfig:
    """Our producer's settings for a worker: its librdkafka-style properties, its
    transaction version and, for a ``tv2_producer``, its deliberate misbehaviour."""
    from ...clients.config import Misbehavior
    from ..ours import our_config

    wrong = getattr(worker.spec, "misbehavior", None)
    extra: dict[str, Any] = {}
    if wrong:
        extra["misbehavior"] = Misbehavior(**wrong.client_misbehavior())
    restarts = getattr(worker.spec, "reinitializations", 0)
    if restarts and not getattr(worker, "reinitialized", False):
        extra["reinitializations"] = restarts  # once: a producer opened again goes on from there
    conf = worker.producer_conf(transactional_id)
    return our_config(conf, worker.spec.transaction_version, **extra)


def our_producer(
    worker: Worker,
    transactional_id: str,
    group_id: str | None,
    client_class: type[OurProducerClient] | None = None,
) -> RecordingProducer:
    """An :class:`~..ours.OurProducerClient` (or ``client_class``) with the worker's settings
    (imported here: only the workers on our client need it)."""
    from ..ours import OurProducerClient

    return (client_class or OurProducerClient)(
        our_producer_config(worker, transactional_id),
        worker.writer,
        reporter=worker.ctx.reporter,
        request_type=worker.request_type,
        padding_bytes=worker.spec.padding_bytes,
        group_id=group_id,
        stopping=worker.ctx.stopping,
    )


class Tv2ProducerWorker(TransactionalProducerWorker):
    """``transactional_producer`` on our own client: TV2 where the cluster offers it."""

    request_type = "tv2"
    spec: Tv2ProducerSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.steps = 0
        self.reinitialized = False  # spec.reinitializations happen at the first open only

    def open_clients(self) -> None:
        from ..late_requests import LateRequestProducer

        late = self.spec.misbehavior.late_request != "none"
        client_class = LateRequestProducer if late else None
        self.client = our_producer(self, self.transactional_id, None, client_class)
        self.reinitialized = True

    def transaction(self) -> Outcome:
        """Every ``late_every``-th one a late-request transaction pair, if asked for."""
        from .late_transactions import FLOWS

        wrong = self.spec.misbehavior
        self.steps += 1
        if wrong.late_request == "none" or self.steps % wrong.late_every:
            return super().transaction()
        return FLOWS[wrong.late_request](self)


KIND = UserKind(
    spec=Tv2ProducerSpec,
    worker=Tv2ProducerWorker,
    prefix="tv2-producer",
    locust_user="Tv2ProducerUser",
    crash_holds={"crash_producer": "before-commit"},
    native_client=False,  # our own client (pure Python)
)
