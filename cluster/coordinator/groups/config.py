"""Tunables of the classic group coordinator (Kafka's ``group.*`` broker configs)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class GroupConfig:
    """Group-coordinator settings. Defaults follow Kafka except where noted.

    ``initial_rebalance_delay_ms`` is Kafka's ``group.initial.rebalance.delay.ms``
    (default 3000 there): when the first member joins an empty group the coordinator
    waits this long (extended while more members keep arriving, bounded by the
    rebalance timeout) so that consumers started together land in one generation.
    The default here is 100 ms so tests and chaos runs stay quick; 0 completes the
    first join phase as soon as every known member has joined.

    ``min_session_timeout_ms`` is ``group.min.session.timeout.ms`` (6000 in Kafka);
    lowered to 100 so chaos scenarios can use short session timeouts.

    ``timer_tick_ms`` is how often the background task checks session, rebalance and
    sync deadlines; 0 disables the task and the owner calls ``GroupCoordinator.tick()``
    itself (unit tests with a fake clock do this).
    """

    initial_rebalance_delay_ms: int = 100
    min_session_timeout_ms: int = 100
    max_session_timeout_ms: int = 1_800_000
    max_group_size: int = 2**31 - 1
    offset_metadata_max_bytes: int = 4096
    timer_tick_ms: int = 20
    compact_min_bytes: int = 16 * 1024 * 1024
    fsync: bool = False
