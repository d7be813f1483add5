"""tv2_copier: an eos_copier whose producer is our own client (TxnOffsetCommit v5 under
TV2); its consumer stays confluent-kafka."""

from __future__ import annotations

from typing import Literal

from ..recording import RecordingProducer
from ..spec import TransactionVersion
from .eos_copier import EOSCopierSpec, EOSCopierWorker
from .kind import UserKind
from .tv2_producer import our_producer


class Tv2CopierSpec(EOSCopierSpec):
    """An ``eos_copier`` whose producer is our own client (its consumer stays confluent-kafka)."""

    kind: Literal["tv2_copier"] = "tv2_copier"  # type: ignore[assignment]
    transaction_version: TransactionVersion = None


class Tv2CopierWorker(EOSCopierWorker):
    """``eos_copier`` whose producer is our own client (TxnOffsetCommit v5 under TV2)."""

    request_type = "tv2-copier"

    def _new_producer(self) -> RecordingProducer:
        return our_producer(self, self.transactional_id, self.group_id)


KIND = UserKind(
    spec=Tv2CopierSpec,
    worker=Tv2CopierWorker,
    prefix="tv2-copier",
    locust_user="Tv2CopierUser",
    crash_holds={"crash_consumer": "in-poll"},
)
