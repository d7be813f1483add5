"""Our producer's settings, and the ways it can misbehave on purpose.

Names follow the Java client's properties where there is one (``transactional.id`` is
``transactional_id``, ``linger.ms`` is ``linger_ms``...). ``transaction_version`` None
takes the cluster's finalized ``transaction.version`` at the start of each transaction;
0, 1 or 2 forces one (2 on a cluster that does not serve Produce v12 / EndTxn v5 is refused).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from ...cluster.security.sasl import SaslCredentials
from ..client_security import sasl_credentials

AddPartitionsOrder = Literal["before", "after", "never"]


@dataclass(frozen=True)
class Misbehavior:
    """Deliberate client bugs, for reproducing what KIP-890's defenses are for.

    * ``add_partitions`` (transaction.version 0/1): ``before`` is correct (AddPartitionsToTxn
      answered before the first Produce to a partition); ``after`` writes first and adds the
      partition once the write is acknowledged; ``never`` writes without adding it at all.
    * ``skip_epoch_bump``: after an abortable error, do not bump the epoch with
      InitProducerId (KIP-360) under transaction.version 0/1, so the next transaction reuses
      the epoch a late request of the aborted one carries.

    Held requests and stale epochs are methods of the producer (``hold_produce``,
    ``hold_end_txn``, ``reuse_stale_epoch``).
    """

    add_partitions: AddPartitionsOrder = "before"
    skip_epoch_bump: bool = False


#: enough re-initialisations to exhaust a producer id's epochs (Short.MAX_VALUE)
MAX_REINITIALIZATIONS = 32_767

#: librdkafka's and Kafka's default transaction.timeout.ms
DEFAULT_TRANSACTION_TIMEOUT_MS = 60_000


@dataclass(frozen=True)
class ProducerConfig:
    bootstrap: str
    client_id: str = "txnchaos-producer"
    #: None: an idempotent (non-transactional) producer.
    transactional_id: str | None = None
    #: None: 60 s (``DEFAULT_TRANSACTION_TIMEOUT_MS``); see ``transaction_timeout``.
    transaction_timeout_ms: int | None = None
    #: KIP-939: take part in an external two-phase commit (InitProducerId v6 Enable2Pc):
    #: the coordinator never times our transactions out, so setting
    #: ``transaction_timeout_ms`` too is an error (KIP-939), and ``prepare_transaction``
    #: is allowed.
    enable_two_phase_commit: bool = False
    #: None: the cluster's finalized transaction.version; 0/1/2 forces the protocol.
    transaction_version: int | None = None
    linger_ms: float = 5.0
    batch_max_bytes: int = 1_048_576
    request_timeout_ms: int = 30_000
    delivery_timeout_ms: int = 120_000
    retry_backoff_ms: int = 100
    metadata_max_age_ms: int = 30_000
    misbehavior: Misbehavior = field(default_factory=Misbehavior)
    #: ``init_transactions`` sends InitProducerId this many times more, with its current
    #: producer id and epoch (KIP-360, as a producer recovering from that many errors):
    #: each bumps the epoch by one, a retry does not bump twice (the coordinator gives a new
    #: producer id once the epoch is exhausted, 32,766). A run thus reaches the epochs a
    #: long-lived producer reaches (under TV2 every transaction bumps the epoch). The calls
    #: are pipelined (``producer.REINITIALIZATIONS_IN_FLIGHT`` at a time), each naming the
    #: epoch the ones before it leave.
    reinitializations: int = 0
    #: librdkafka's ``security.protocol``: PLAINTEXT, or SASL_PLAINTEXT with the
    #: ``sasl_*`` settings (mechanism PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512).
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)

    def sasl(self) -> SaslCredentials | None:
        """What every connection logs in with (None: no SASL)."""
        return sasl_credentials(
            self.security_protocol, self.sasl_mechanism, self.sasl_username, self.sasl_password
        )

    def __post_init__(self) -> None:
        self.sasl()  # a setting that cannot be used is refused here, not at the first send
        if self.transaction_version not in (None, 0, 1, 2):
            raise ValueError(
                f"transaction_version must be 0, 1, 2 or None, not {self.transaction_version}"
            )
        if self.transaction_timeout <= 0 or self.request_timeout_ms <= 0:
            raise ValueError("timeouts must be positive")
        if self.reinitializations and self.transactional_id is None:
            raise ValueError("reinitializations needs a transactional_id")
        if not 0 <= self.reinitializations <= MAX_REINITIALIZATIONS:
            raise ValueError(f"reinitializations must be 0 to {MAX_REINITIALIZATIONS}")
        if self.enable_two_phase_commit and self.transactional_id is None:
            raise ValueError("enable_two_phase_commit needs a transactional_id")
        if self.enable_two_phase_commit and self.transaction_timeout_ms is not None:
            raise ValueError(
                "transaction_timeout_ms cannot be set with enable_two_phase_commit: a "
                "two-phase-commit transaction never times out (KIP-939)"
            )

    @property
    def transaction_timeout(self) -> int:
        """The transaction timeout InitProducerId asks for, in ms."""
        if self.transaction_timeout_ms is None:
            return DEFAULT_TRANSACTION_TIMEOUT_MS
        return self.transaction_timeout_ms
