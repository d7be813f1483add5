"""What each ``txnchaos transactions`` verb does, on top of :class:`AdminClient`: the
workflow of KIP-664's ``kafka-transactions.sh`` (list, describe, describe-producers,
find-hanging, abort), as Kafka's TransactionsCommand implements it, and KIP-939's
force-terminate."""

from __future__ import annotations

from dataclasses import dataclass

from .admin import (
    AbortSpec,
    AdminClient,
    AdminError,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    error_name,
)

#: DescribeProducers requests carry at most this many partitions (Kafka's tool: 500).
BATCH = 500
TRANSACTIONAL_ID_NOT_FOUND = 105


@dataclass(frozen=True, slots=True)
class OpenTransaction:
    """A partition's open transaction, as its leader (or ``--broker``) describes it."""

    topic: str
    partition: int
    producer: ProducerState


async def list_transactions(
    admin: AdminClient,
    broker: int | None = None,
    *,
    states: list[str] | None = None,
    producer_ids: list[int] | None = None,
    duration_ms: int = -1,
    pattern: str | None = None,
) -> list[TransactionListing]:
    """ListTransactions on every broker (each answers for what it coordinates) or one."""
    if broker is None:
        md = await admin.metadata([])
        brokers = sorted(md.brokers)
    else:
        brokers = [broker]
    out: list[TransactionListing] = []
    for node in brokers:
        out += await admin.list_transactions(
            node,
            states=states,
            producer_ids=producer_ids,
            duration_ms=duration_ms,
            pattern=pattern,
        )
    return sorted(out, key=lambda t: (t.transactional_id, t.coordinator))


async def describe(admin: AdminClient, transactional_id: str) -> TransactionDescription:
    return await admin.describe_transaction(transactional_id)


async def describe_producers(
    admin: AdminClient, topic: str, partition: int, broker: int | None = None
) -> list[ProducerState]:
    found = await admin.describe_producers([(topic, partition)], broker)
    return found[(topic, partition)]


async def _partitions_to_search(
    admin: AdminClient, broker: int | None, topic: str | None, partition: int | None
) -> list[tuple[str, int]]:
    if topic is not None and partition is not None:
        return [(topic, partition)]
    md = await admin.metadata(None if topic is None else [topic])
    if topic is not None and topic in md.topic_errors:
        raise AdminError(f"topic {topic!r}: {error_name(md.topic_errors[topic])}")
    return sorted(
        tp
        for tp, info in md.partitions.items()
        if (topic is None or tp[0] == topic) and (broker is None or broker in info.replicas)
    )


async def find_hanging(
    admin: AdminClient,
    *,
    broker: int | None,
    topic: str | None,
    partition: int | None,
    max_transaction_timeout_ms: int,
    now_ms: int,
) -> list[OpenTransaction]:
    """Open transactions silent longer than the maximum timeout that no coordinator will
    finish: their producer id maps to no transactional id, the id is gone, or its
    coordinator's current transaction does not include the partition."""
    partitions = await _partitions_to_search(admin, broker, topic, partition)
    candidates: list[OpenTransaction] = []
    for i in range(0, len(partitions), BATCH):
        states = await admin.describe_producers(partitions[i : i + BATCH], broker)
        for (t, p), producers in sorted(states.items()):
            for producer in producers:
                if (
                    producer.start_offset is not None
                    and now_ms - producer.last_timestamp > max_transaction_timeout_ms
                ):
                    candidates.append(OpenTransaction(t, p, producer))
    if not candidates:
        return []
    pids = sorted({c.producer.producer_id for c in candidates})
    listed = await list_transactions(admin, producer_ids=pids)
    ids = {t.producer_id: t.transactional_id for t in listed if t.producer_id in pids}
    descriptions: dict[str, TransactionDescription | None] = {}
    for txn_id in sorted(set(ids.values())):
        try:
            descriptions[txn_id] = await admin.describe_transaction(txn_id)
        except AdminError as exc:
            if exc.code != TRANSACTIONAL_ID_NOT_FOUND:
                raise
            descriptions[txn_id] = None
    hanging = []
    for c in candidates:
        owner = ids.get(c.producer.producer_id)
        d = None if owner is None else descriptions.get(owner)
        if d is None or (c.topic, c.partition) not in d.partitions:
            hanging.append(c)
    return hanging


async def abort_spec_for_offset(
    admin: AdminClient, topic: str, partition: int, start_offset: int
) -> AbortSpec:
    """The open transaction starting at ``start_offset`` (checked with DescribeProducers on
    the leader), with the producer id, epoch and coordinator epoch the abort must carry."""
    producers = await describe_producers(admin, topic, partition)
    match = [p for p in producers if p.start_offset == start_offset]
    if not match:
        raise AdminError(
            f"no open transaction starts at offset {start_offset} on {topic}-{partition}"
        )
    p = match[0]
    return spec_for(topic, partition, p.producer_id, p.producer_epoch, p.coordinator_epoch)


def spec_for(
    topic: str, partition: int, producer_id: int, producer_epoch: int, coordinator_epoch: int
) -> AbortSpec:
    """An abort of a producer that never completed a transaction on the partition carries
    coordinator epoch 0 (its -1 in DescribeProducers is below every real coordinator
    epoch a leader would fence with), as Kafka's tool does."""
    return AbortSpec(topic, partition, producer_id, producer_epoch, max(coordinator_epoch, 0))


async def abort(admin: AdminClient, spec: AbortSpec) -> None:
    await admin.abort(spec)


async def force_terminate(admin: AdminClient, transactional_id: str) -> tuple[int, int]:
    """Abort the id's open transaction, prepared or not (KIP-939); its new producer id and
    epoch."""
    return await admin.force_terminate(transactional_id)
