"""KIP-360 on our producer speaking TV2 (Produce v12, EndTxn v5): once the coordinator no
longer maps the transactional id to the producer's id (transactional.id.expiration.ms
passed while the producer was idle), the next write gets INVALID_PRODUCER_ID_MAPPING; the
abort then takes a producer id the coordinator maps (InitProducerId with the current id
and epoch) instead of sending EndTxn v5, which answers the same error every time (the
producer used to stay aborting for good), and the next transaction commits."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from txnchaos.harness.clients import AbortableError, Producer, ProducerConfig
from txnchaos.harness.launch.local import LocalCluster
from txnchaos.harness.transactions_tool.admin import AdminClient, AdminError

from ..conftest import start_cluster
from .txn_clients_support import committed_values, create_topic, unique, wait_until

pytestmark = pytest.mark.integration

INVALID_PRODUCER_ID_MAPPING = 49


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    c = start_cluster(
        tmp_path / "c",
        brokers=1,
        settings=[
            "transaction.version=2",
            "transactional.id.expiration.ms=500",
            "transaction.remove.expired.transaction.cleanup.interval.ms=100",
        ],
    )
    yield c
    c.down()


async def expired(bootstrap: str, txn_id: str) -> bool:
    async with AdminClient(bootstrap) as admin:
        try:
            await admin.describe_transaction(txn_id)
        except AdminError:
            return True  # TRANSACTIONAL_ID_NOT_FOUND
    return False


def test_tv2_producer_recovers_from_a_lost_producer_id_mapping(cluster: LocalCluster) -> None:
    bootstrap = str(cluster.state()["bootstrap"])
    topic, txn_id = unique("kip360-tv2"), unique("kip360-tv2-tx")
    create_topic(bootstrap, topic, 1)

    async def main() -> tuple[int, int, int]:
        p = Producer(ProducerConfig(bootstrap, transactional_id=txn_id))
        await p.init_transactions(30)
        await p.begin_transaction()
        assert p.transaction_version == 2
        await p.send(topic, 0, b"first")
        await p.commit_transaction(30)
        first = p.ids.producer_id
        await asyncio.to_thread(
            wait_until, lambda: asyncio.run(expired(bootstrap, txn_id)), "the id to expire"
        )
        await p.begin_transaction()
        with pytest.raises(AbortableError) as lost:
            await p.send(topic, 0, b"lost")
        await p.abort_transaction(30)  # was: INVALID_PRODUCER_ID_MAPPING on every try
        await p.begin_transaction()
        await p.send(topic, 0, b"after")
        await p.commit_transaction(30)
        await p.close()
        return int(lost.value.code or 0), first, p.ids.producer_id

    code, first, after = asyncio.run(main())
    assert code == INVALID_PRODUCER_ID_MAPPING
    assert after != first  # a producer id the coordinator maps again
    assert committed_values(bootstrap, topic, [0]) == [b"first", b"after"]
