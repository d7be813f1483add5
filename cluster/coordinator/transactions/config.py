"""Tunables of the transaction coordinator (Kafka's ``transaction.*`` broker configs)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ...bugs import BUG_SWITCHES, NO_BUGS, BugSwitches


@dataclass(frozen=True, slots=True)
class TxnConfig:
    """Transaction-coordinator settings; defaults follow Kafka.

    ``abort_timed_out_interval_ms`` (``transaction.abort.timed.out.transaction.cleanup
    .interval.ms``) and ``remove_expired_interval_ms``
    (``transaction.remove.expired.transaction.cleanup.interval.ms``) are the periods of
    the background tasks; 0 disables a task and the owner calls
    ``TransactionCoordinator.abort_timed_out_transactions()`` /
    ``remove_expired_transactional_ids()`` itself (unit tests with a fake clock do).

    ``marker_retry_backoff_ms`` .. ``marker_max_backoff_ms``: how a marker that could
    not be written is retried (doubling per attempt). ``marker_request_timeout_ms``
    bounds one WriteTxnMarkers round trip. ``marker_max_in_flight``: WriteTxnMarkers
    requests in flight per node (1: markers queued meanwhile are batched into the next
    request; 2 was measured no faster under load and sends more requests).

    ``concurrent_wait_ms`` (``txnchaos.transaction.concurrent.wait.ms``, not a Kafka
    setting): how long a request for a transaction whose markers are still in flight
    waits for them before getting CONCURRENT_TRANSACTIONS; 0 answers at once, as
    Kafka does.

    ``two_phase_commit_enable`` (``transaction.two.phase.commit.enable``, KIP-939): off,
    an InitProducerId asking for 2PC gets TRANSACTIONAL_ID_AUTHORIZATION_FAILED.
    """

    num_partitions: int = 50
    offsets_num_partitions: int = 50
    max_timeout_ms: int = 900_000
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000
    abort_timed_out_interval_ms: int = 10_000
    remove_expired_interval_ms: int = 3_600_000
    marker_retry_backoff_ms: int = 50
    marker_max_backoff_ms: int = 1_000
    marker_request_timeout_ms: int = 10_000
    marker_max_in_flight: int = 1
    fsync: bool = False
    compact_min_bytes: int = 16 * 1024 * 1024
    concurrent_wait_ms: int = 100
    two_phase_commit_enable: bool = False
    bugs: BugSwitches = NO_BUGS  # txnchaos.bug.* switches (cluster/bugs.py)

    @classmethod
    def from_settings(cls, settings: Any, **overrides: Any) -> TxnConfig:
        """Build from a ``NodeSettings`` (unknown settings keep their defaults)."""

        def get(name: str, default: Any) -> Any:
            try:
                return settings.get(name)
            except KeyError:
                return default

        values: dict[str, Any] = {
            "num_partitions": get("transaction.state.log.num.partitions", 50),
            "offsets_num_partitions": get("offsets.topic.num.partitions", 50),
            "max_timeout_ms": get("transaction.max.timeout.ms", 900_000),
            "transactional_id_expiration_ms": get(
                "transactional.id.expiration.ms", 7 * 24 * 3600 * 1000
            ),
            "abort_timed_out_interval_ms": get(
                "transaction.abort.timed.out.transaction.cleanup.interval.ms", 10_000
            ),
            "remove_expired_interval_ms": get(
                "transaction.remove.expired.transaction.cleanup.interval.ms", 3_600_000
            ),
            "concurrent_wait_ms": get("txnchaos.transaction.concurrent.wait.ms", 100),
            "two_phase_commit_enable": get("transaction.two.phase.commit.enable", False),
            "bugs": BugSwitches(**{b.field: bool(get(b.setting, False)) for b in BUG_SWITCHES}),
        }
        values.update(overrides)
        return cls(**values)
