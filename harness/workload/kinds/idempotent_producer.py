"""idempotent_producer: batches of non-transactional records (a confluent-kafka producer)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal, NoReturn

from pydantic import Field

from ....rundir.schema import encode_value
from ..clients import ClientError, ProducerReset
from ..spec import ProducerSpecBase
from ..workers import FLUSH_TIMEOUT_S, ProducerWorker, WorkerContext, hold_forever
from .kind import UserKind


class IdempotentProducerSpec(ProducerSpecBase):
    kind: Literal["idempotent_producer"] = "idempotent_producer"
    #: Records produced per task before the task flushes and waits for their acks.
    records_per_batch: Annotated[int, Field(ge=1, le=100_000)] = 10


class IdempotentProducerWorker(ProducerWorker):
    """Batches of non-transactional records (``txn`` = ``-`` in the values)."""

    request_type = "idempotent"
    spec: IdempotentProducerSpec

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        super().__init__(spec, ctx, process, index)
        self.next_index = 0
        self.client = None
        self._parts = self.partitions()

    def conf(self) -> dict[str, Any]:
        return self.producer_conf()

    def send_batch(self) -> None:
        c = self.client
        assert c is not None
        for _ in range(self.spec.records_per_batch):
            topic, p = self.rng.choice(self._parts)
            key = str(p) if self.spec.keyed else None
            i = self.next_index
            self.next_index += 1
            c.send(topic, p, encode_value(self.process, None, i), key=key)

    def hold(self, point: str, announce: Callable[[str], None]) -> NoReturn:
        """before-ack: a batch produced whose delivery reports are never served."""
        if point != "before-ack":
            super().hold(point, announce)
        self.send_batch()
        announce(f"HOLD sent={self.next_index}")
        hold_forever()

    def step(self) -> None:
        c = self.client
        assert c is not None
        try:
            self.send_batch()
            c.flush(FLUSH_TIMEOUT_S)
        except ProducerReset:
            self.close_clients(False)
            self.open_clients()
        except ClientError:
            pass
        if c.fatal:
            self.close_clients(False)
            self.open_clients()


KIND = UserKind(
    spec=IdempotentProducerSpec,
    worker=IdempotentProducerWorker,
    prefix="idem-producer",
    locust_user="IdempotentProducerUser",
    crash_holds={"crash_producer": "before-ack"},
)
