"""Our own Kafka producer (asyncio, on the project's codec): idempotent and transactional,
transaction.version 0/1 (AddPartitionsToTxn) and 2 (KIP-890: implicit adds, an epoch per
transaction), and able to misbehave on purpose for bug reproductions.

Modules: :mod:`.errors` (error classes per request), :mod:`.connection` (nodes, versions,
features), :mod:`.metadata` (leaders, coordinators), :mod:`.producer_state` (id, epoch,
sequences), :mod:`.txn_state` (the state machine), :mod:`.txn_manager` (coordinator
requests), :mod:`.batch` and :mod:`.sender` (records and Produce), :mod:`.producer` (the API),
:mod:`.group` (consumer group identity), :mod:`.two_phase` (KIP-939's prepared-transaction
state), :mod:`.bridge` (blocking use from threads/gevent).
"""

from .config import Misbehavior, ProducerConfig
from .errors import AbortableError, FatalError, KafkaClientError, RetriableError, StateError
from .group import GroupMetadata
from .producer import HeldRequest, Producer
from .sender import RecordMetadata
from .two_phase import PreparedTxnState

__all__ = [
    "AbortableError",
    "FatalError",
    "GroupMetadata",
    "HeldRequest",
    "KafkaClientError",
    "Misbehavior",
    "PreparedTxnState",
    "Producer",
    "ProducerConfig",
    "RecordMetadata",
    "RetriableError",
    "StateError",
]
