"""Our own producer (harness/clients) against real nodes, read back by confluent-kafka.

Each test runs with the protocol forced to transaction.version 0 (AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn <= v4) and with the protocol the cluster offers (``auto``: TV2 where
the cluster finalizes transaction.version 2 and serves Produce v12 / EndTxn v5, else the old
protocol), so both paths meet the same cluster.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from txnchaos.harness.clients import (
    AbortableError,
    FatalError,
    GroupMetadata,
    Misbehavior,
    Producer,
    ProducerConfig,
    RetriableError,
)
from txnchaos.harness.faults.proxy.thread import FleetThread
from txnchaos.harness.launch.local import LocalCluster

from .txn_clients_support import (
    committed_values,
    create_topic,
    txn_cluster,
    uncommitted_values,
    unique,
    wait_until,
)

pytestmark = pytest.mark.integration

MODES = ["tv0", "auto"]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = txn_cluster(tmp_path_factory.mktemp("our-client"))
    yield c
    c.down()


@pytest.fixture
def bootstrap(cluster: LocalCluster) -> str:
    return str(cluster.state()["bootstrap"])


def config(bootstrap: str, mode: str, txn_id: str | None, **extra: Any) -> ProducerConfig:
    return ProducerConfig(
        bootstrap,
        client_id=f"ours-{mode}",
        transactional_id=txn_id,
        transaction_version=0 if mode == "tv0" else None,
        **extra,
    )


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def expected_tv(p: Producer) -> int:
    """What ``auto`` must pick: 2 when the cluster finalized it and serves the versions."""
    served = p.view.features.transaction_version()
    return 2 if served >= 2 else served


@pytest.mark.parametrize("mode", MODES)
def test_commit_and_abort_read_back(bootstrap: str, mode: str) -> None:
    topic = unique(f"ours-{mode}")
    create_topic(bootstrap, topic, 3)

    async def main() -> list[tuple[int, int]]:
        p = Producer(config(bootstrap, mode, unique("ours-tx")))
        await p.init_transactions(30)
        epochs = [p.ids.epoch]
        for txn in range(4):
            await p.begin_transaction()
            if mode == "tv0":
                assert p.transaction_version == 0
            else:
                assert p.transaction_version == expected_tv(p)
            futs = [p.send(topic, i % 3, f"{txn}-{i}".encode(), key=b"k") for i in range(9)]
            if txn % 2:
                await p.flush(30)  # the aborted records reach the log
                await p.abort_transaction(30)
            else:
                await p.commit_transaction(30)
            offsets = [f.result().offset for f in futs]
            assert all(o >= 0 for o in offsets), offsets
            epochs.append(p.ids.epoch)
        tv = p.transaction_version
        await p.close()
        return [(tv, e) for e in epochs]

    result = run(main())
    tv = result[0][0]
    epochs = [e for _, e in result]
    if tv == 2:
        assert epochs == list(range(epochs[0], epochs[0] + 5)), epochs  # one bump per EndTxn
    else:
        assert len(set(epochs)) == 1, epochs  # no error: the epoch stays
    committed = sorted(v.decode() for v in committed_values(bootstrap, topic, range(3)))
    assert committed == sorted(f"{t}-{i}" for t in (0, 2) for i in range(9))
    everything = {v.decode() for v in uncommitted_values(bootstrap, topic, range(3))}
    assert everything == {f"{t}-{i}" for t in range(4) for i in range(9)}


@pytest.mark.parametrize("mode", MODES)
def test_second_instance_fences_the_first(bootstrap: str, mode: str) -> None:
    topic = unique(f"fence-{mode}")
    create_topic(bootstrap, topic, 2)
    txn_id = unique("fence-tx")

    async def main() -> None:
        zombie = Producer(config(bootstrap, mode, txn_id))
        await zombie.init_transactions(30)
        await zombie.begin_transaction()
        for i in range(6):
            zombie.send(topic, i % 2, f"zombie-{i}".encode())
        await zombie.flush(30)

        successor = Producer(config(bootstrap, mode, txn_id))
        await successor.init_transactions(30)  # aborts the zombie's transaction
        assert successor.ids.producer_id == zombie.ids.producer_id
        assert successor.ids.epoch > zombie.ids.epoch

        with pytest.raises(FatalError):
            await zombie.commit_transaction(30)
        with pytest.raises(FatalError):
            await zombie.begin_transaction()
        await zombie.close()

        await successor.begin_transaction()
        for i in range(4):
            successor.send(topic, i % 2, f"successor-{i}".encode())
        await successor.commit_transaction(30)
        await successor.close()

    run(main())
    committed = sorted(v.decode() for v in committed_values(bootstrap, topic, range(2)))
    assert committed == [f"successor-{i}" for i in range(4)]


def test_reinitializations_bump_the_epoch_as_restarts_would(bootstrap: str) -> None:
    """``reinitializations`` N: init_transactions sends InitProducerId N more times, each
    bumping the epoch by one, and the producer works at the epoch it reached."""
    topic = unique("restarts")
    create_topic(bootstrap, topic, 1)
    txn_id = unique("restarts-tx")

    async def main() -> None:
        first = Producer(config(bootstrap, "auto", txn_id))
        await first.init_transactions(30)
        start = first.ids.epoch
        await first.close()
        aged = Producer(config(bootstrap, "auto", txn_id, reinitializations=25))
        await aged.init_transactions(30)
        assert aged.ids.producer_id == first.ids.producer_id
        assert aged.ids.epoch == start + 26  # its own init and 25 more
        await aged.begin_transaction()
        aged.send(topic, 0, b"aged")
        await aged.commit_transaction(30)
        await aged.close()

    run(main())
    assert [v.decode() for v in committed_values(bootstrap, topic, range(1))] == ["aged"]
    with pytest.raises(ValueError, match="reinitializations must be"):
        config(bootstrap, "auto", txn_id, reinitializations=-1)
    with pytest.raises(ValueError, match="needs a transactional_id"):
        config(bootstrap, "auto", None, reinitializations=1)


async def _hold_bumping_inits(
    proxies: FleetThread, bootstrap: str, txn_id: str
) -> tuple[int, int, str]:
    """A first instance of ``txn_id`` initialises; then the proxy holds every InitProducerId
    naming its producer id (the epoch-bumping calls), while a new instance's own first call
    (producer id -1) goes through. Returns its producer id and epoch, and the rule's id."""
    first = Producer(config(bootstrap, "auto", txn_id))
    await first.init_transactions(30)
    producer_id, start = first.ids.producer_id, first.ids.epoch
    await first.close()
    hold = proxies.add_rule(
        {
            "kind": "delay",
            "api": "InitProducerId",
            "producer_id": producer_id,
            "ms": 600_000,
            "head_of_line": False,
        }
    )
    return producer_id, start, hold.id


async def _until(done: Callable[[], bool], init: asyncio.Future[None], what: str) -> None:
    """Wait (60 s at most) for ``done`` while ``init`` is still under way."""
    deadline = time.monotonic() + 60
    while not done():
        assert not init.done(), init
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.05)


def test_reinitializations_are_pipelined(bootstrap: str) -> None:
    """The re-initialisations go several at a time on the coordinator's connection, each
    naming the epoch the ones before it leave (not one client round trip each, which made
    32,766 of them take 25 minutes on a loaded machine): a proxy holding every epoch-bumping
    InitProducerId holds many at once; released, they bump the epoch once each, in order."""
    txn_id = unique("pipelined-tx")
    count = 40
    with FleetThread() as proxies:
        cluster = proxies.external(bootstrap.split(","))

        def captured() -> int:
            links = proxies.describe()["links"].values()
            return sum(int(link["stats"]["frames_captured_up"]) for link in links)

        async def main() -> None:
            servers = cluster.bootstrap_servers
            producer_id, start, hold = await _hold_bumping_inits(proxies, servers, txn_id)
            before = captured()
            aged = Producer(config(servers, "auto", txn_id, reinitializations=count))
            init = asyncio.ensure_future(aged.init_transactions(60))
            # one at a time, the proxy would see the set-up requests and one held call
            await _until(lambda: captured() - before >= count, init, "the calls were not pipelined")
            proxies.remove_rule(hold)  # the held calls go on
            await init
            assert aged.ids.producer_id == producer_id
            assert aged.ids.epoch == start + 1 + count
            await aged.close()

        run(main())


def test_reinitializations_survive_a_window_that_stalls_past_its_timeout(bootstrap: str) -> None:
    """A window of pipelined re-initialisations held past the client's timeout and applied
    afterwards (a stalled connection on a loaded machine) leaves the coordinator at an epoch
    the producer does not know: the producer learns it with one call in a new instance's
    form (no producer id, which the proxy lets through) instead of naming a stale epoch and
    being fenced, and goes on to at least the epoch it was asked for."""
    topic = unique("stalled")
    create_topic(bootstrap, topic, 1)
    txn_id = unique("stalled-tx")
    count = 20
    with FleetThread() as proxies:
        cluster = proxies.external(bootstrap.split(","))

        async def main() -> None:
            servers = cluster.bootstrap_servers
            producer_id, start, hold = await _hold_bumping_inits(proxies, servers, txn_id)
            aged = Producer(
                config(servers, "auto", txn_id, reinitializations=count, request_timeout_ms=1_000)
            )
            init = asyncio.ensure_future(aged.init_transactions(3))
            # its own first call and the one after the held window timed out went through
            await _until(
                lambda: aged.ids.epoch >= start + 2, init, "no call learnt the coordinator's epoch"
            )
            proxies.remove_rule(hold)  # the held calls reach the coordinator late
            await init
            assert aged.ids.producer_id == producer_id
            assert aged.ids.epoch >= start + 1 + count
            await aged.begin_transaction()
            aged.send(topic, 0, b"after-the-stall")
            await aged.commit_transaction(30)
            await aged.close()

        run(main())
    assert [v.decode() for v in committed_values(bootstrap, topic, range(1))] == ["after-the-stall"]


def _group_member(bootstrap: str, group: str, topic: str) -> Consumer:
    c = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "isolation.level": "read_committed",
        }
    )
    assigned: list[TopicPartition] = []
    c.subscribe([topic], on_assign=lambda _c, parts: assigned.extend(parts))

    def joined() -> bool:
        c.poll(0.2)
        return bool(assigned)

    wait_until(joined, f"a generation of group {group}")
    return c


@pytest.mark.parametrize("mode", MODES)
def test_send_offsets_to_transaction(bootstrap: str, mode: str) -> None:
    source, sink = unique(f"in-{mode}"), unique(f"out-{mode}")
    create_topic(bootstrap, source, 2)
    create_topic(bootstrap, sink, 2)
    group = unique("copiers")
    member = _group_member(bootstrap, group, source)
    try:
        meta = GroupMetadata.from_librdkafka(member.consumer_group_metadata())
        assert meta.group_id == group and meta.generation_id >= 1 and meta.member_id

        async def main() -> None:
            p = Producer(config(bootstrap, mode, unique("copier-tx")))
            await p.init_transactions(30)
            await p.begin_transaction()
            p.send(sink, 0, b"aborted")
            await p.send_offsets_to_transaction([(source, 0, 99), (source, 1, 99)], meta, 30)
            await p.abort_transaction(30)

            await p.begin_transaction()
            p.send(sink, 1, b"copied")
            await p.send_offsets_to_transaction([(source, 0, 5), (source, 1, 7)], meta, 30)
            await p.commit_transaction(30)
            await p.close()

        run(main())
        # The coordinator answers EndTxn before its markers reach the offsets partition (as
        # Kafka): the offsets are pending until then, so wait for them to appear.
        wanted = [TopicPartition(source, 0), TopicPartition(source, 1)]
        committed: list[tuple[int, int]] = []
        for _ in range(300):
            committed = sorted((tp.partition, tp.offset) for tp in member.committed(wanted, 30))
            if committed == [(0, 5), (1, 7)]:
                break
            time.sleep(0.1)
        assert committed == [(0, 5), (1, 7)]
    finally:
        member.close()
    assert [v.decode() for v in committed_values(bootstrap, sink, range(2))] == ["copied"]


def test_failed_batch_bumps_the_epoch_and_a_stale_epoch_is_fenced(bootstrap: str) -> None:
    """TV0, KIP-360: a batch that cannot be delivered (a partition that does not exist,
    written before it is added: ``add_partitions="after"``) makes the transaction abortable;
    the abort bumps the epoch with InitProducerId(current id and epoch), and the next
    transaction commits. Going back to the old epoch: AddPartitionsToTxn is refused by the
    coordinator (fenced: fatal), and the producer stays unusable."""
    topic = unique("bump")
    create_topic(bootstrap, topic, 1)

    async def main() -> None:
        p = Producer(
            config(
                bootstrap,
                "tv0",
                unique("bump-tx"),
                delivery_timeout_ms=1500,
                misbehavior=Misbehavior(add_partitions="after"),
            )
        )
        await p.init_transactions(30)
        before = p.ids
        await p.begin_transaction()
        missing = p.send(topic, 5, b"no such partition")
        with pytest.raises(RetriableError) as failed:
            await missing
        assert not failed.value.maybe_written
        with pytest.raises(AbortableError):
            await p.commit_transaction(30)
        await p.abort_transaction(30)
        assert p.ids.producer_id == before.producer_id
        assert p.ids.epoch == before.epoch + 1

        p.misbehavior = Misbehavior()  # a cluster that verifies would refuse "after"
        await p.begin_transaction()
        p.send(topic, 0, b"after-bump")
        await p.commit_transaction(30)

        assert p.reuse_stale_epoch() == before
        await p.begin_transaction()
        with pytest.raises(FatalError) as refused:
            await p.send(topic, 0, b"stale")
        assert refused.value.name in ("PRODUCER_FENCED", "INVALID_PRODUCER_EPOCH")
        with pytest.raises(FatalError):
            await p.abort_transaction(30)
        await p.close()

    run(main())
    assert [v.decode() for v in committed_values(bootstrap, topic, [0])] == ["after-bump"]


@pytest.mark.parametrize("mode", MODES)
def test_held_produce_sent_later_in_its_transaction(bootstrap: str, mode: str) -> None:
    topic = unique(f"held-{mode}")
    create_topic(bootstrap, topic, 1)

    async def main() -> None:
        p = Producer(config(bootstrap, mode, unique("held-tx"), misbehavior=Misbehavior("before")))
        await p.init_transactions(30)
        await p.begin_transaction()
        held = await p.hold_produce(topic, 0, [(None, b"held")])
        later = p.send(topic, 0, b"later")  # its sequence follows the held batch's
        response = await held.send()
        part = response.responses[0].partition_responses[0]
        assert int(part.error_code) == 0
        assert (await later).offset == int(part.base_offset) + 1
        await p.commit_transaction(30)
        await p.close()

    run(main())
    assert [v.decode() for v in committed_values(bootstrap, topic, [0])] == ["held", "later"]


@pytest.mark.parametrize("level", [0, 1])
def test_auto_follows_a_cluster_below_tv2(tmp_path: Any, level: int) -> None:
    """On a cluster whose finalized transaction.version is below 2 the producer speaks the
    old protocol (AddPartitionsToTxn; the epoch stays across transactions) and its
    transactions commit and abort as on any cluster."""
    c = txn_cluster(
        tmp_path / "cluster", brokers=1, extra_settings=[f"transaction.version={level}"]
    )
    try:
        bootstrap = str(c.state()["bootstrap"])
        topic = unique(f"level{level}")
        create_topic(bootstrap, topic, 2)

        async def main() -> list[int]:
            p = Producer(config(bootstrap, "auto", unique("level-tx")))
            await p.init_transactions(30)
            assert p.cluster_transaction_version == level
            epochs = []
            for txn in range(3):
                await p.begin_transaction()
                assert p.transaction_version == level
                for i in range(4):
                    p.send(topic, i % 2, f"{txn}-{i}".encode())
                if txn == 1:
                    await p.abort_transaction(30)
                else:
                    await p.commit_transaction(30)
                epochs.append(p.ids.epoch)
            await p.close()
            return epochs

        assert len(set(run(main()))) == 1
        committed = sorted(v.decode() for v in committed_values(bootstrap, topic, range(2)))
        assert committed == sorted(f"{t}-{i}" for t in (0, 2) for i in range(4))
    finally:
        c.down()
