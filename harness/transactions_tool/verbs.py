"""What each ``txnchaos transactions`` verb does, on top of :class:`AdminClient`: the
workflow of KIP-664's ``kafka-transactions.sh`` (list, describe, describe-producers,
find-hanging, abort), as Kafka's TransactionsCommand implements it, and KIP-939's
force-terminate."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...cluster.protocol.error_names import error_name
from .admin import (
    AbortSpec,
    AdminClient,
    AdminError,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    Unreachable,
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


@dataclass
class HangingSearch:
    """What find-hanging found, and what it could not look at: a broker that did not answer
    leaves its partitions unsearched (``unsearched``: partition -> broker, -1 for no
    leader), and an open transaction whose coordinator may be the broker that did not
    answer is not called hanging (``unchecked``): it is reported apart, never aborted on a
    guess."""

    hanging: list[OpenTransaction] = field(default_factory=list)
    unchecked: list[OpenTransaction] = field(default_factory=list)
    unsearched: dict[tuple[str, int], int] = field(default_factory=dict)
    unreachable: dict[int, str] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        return not (self.unchecked or self.unsearched or self.unreachable)


async def find_hanging(
    admin: AdminClient,
    *,
    broker: int | None,
    topic: str | None,
    partition: int | None,
    max_transaction_timeout_ms: int,
    now_ms: int,
) -> HangingSearch:
    """Open transactions silent longer than the maximum timeout that no coordinator will
    finish: their producer id maps to no transactional id, the id is gone, or its
    coordinator's current transaction does not include the partition (Kafka's
    TransactionsCommand: the partition set decides, not the epoch; a marker at a higher
    epoch ends an older open transaction too). Brokers that do not answer are skipped and
    named, as is what could not be judged without them."""
    found = HangingSearch()
    partitions = await _partitions_to_search(admin, broker, topic, partition)
    md = await admin.metadata(sorted({t for t, _ in partitions}))
    by_node: dict[int, list[tuple[str, int]]] = {}
    for tp in partitions:
        info = md.partitions.get(tp)
        node = broker if broker is not None else (info.leader if info is not None else -1)
        if node < 0:
            found.unsearched[tp] = -1
            continue
        by_node.setdefault(node, []).append(tp)
    candidates: list[OpenTransaction] = []
    for node, tps in sorted(by_node.items()):
        for i in range(0, len(tps), BATCH):
            batch = tps[i : i + BATCH]
            try:
                states = await admin.describe_producers(batch, node)
            except Unreachable as exc:
                found.unreachable[node] = str(exc)
                found.unsearched.update(dict.fromkeys(batch, node))
                break
            for (t, p), producers in sorted(states.items()):
                for producer in producers:
                    if (
                        producer.start_offset is not None
                        and now_ms - producer.last_timestamp > max_transaction_timeout_ms
                    ):
                        candidates.append(OpenTransaction(t, p, producer))
    if not candidates:
        return found
    pids = sorted({c.producer.producer_id for c in candidates})
    ids: dict[int, str] = {}
    for node in sorted((await admin.metadata([])).brokers):
        try:
            listed = await admin.list_transactions(node, producer_ids=pids)
        except Unreachable as exc:
            found.unreachable[node] = str(exc)
            continue
        ids.update({t.producer_id: t.transactional_id for t in listed if t.producer_id in pids})
    descriptions: dict[str, TransactionDescription | None] = {}
    undescribed: set[str] = set()
    for txn_id in sorted(set(ids.values())):
        try:
            descriptions[txn_id] = await admin.describe_transaction(txn_id)
        except Unreachable:
            undescribed.add(txn_id)
        except AdminError as exc:
            if exc.code != TRANSACTIONAL_ID_NOT_FOUND:
                raise
            descriptions[txn_id] = None
    coordinators_missing = bool(found.unreachable)
    for c in candidates:
        owner = ids.get(c.producer.producer_id)
        if (owner is None and coordinators_missing) or owner in undescribed:
            found.unchecked.append(c)  # its coordinator may be the one that did not answer
            continue
        d = None if owner is None else descriptions.get(owner)
        if d is None or (c.topic, c.partition) not in d.partitions:
            found.hanging.append(c)
    return found


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
