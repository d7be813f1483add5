"""Issue 35 item 4: a transactional batch without its transactional id is refused as
Kafka refuses it (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for the whole request), so a
made-up producer id can no longer open a transaction that no coordinator ends (it held
the last stable offset forever). Item 3's ACL case is in test_access_control."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import start_cluster
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.harness.launch.local import LocalCluster

from .support import controller_client, create_topic, leader_client

pytestmark = pytest.mark.integration

TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("ownership"), brokers=2, coordinators=1)
    yield c
    c.down()


def test_transactional_batch_without_transactional_id_is_refused(cluster: LocalCluster) -> None:
    admin = controller_client(cluster)
    assert create_topic(admin, "no-txn-id").error_code == 0
    admin.close()
    raw = leader_client(cluster, "no-txn-id", 0)
    try:
        made_up = encode_batch(
            [b"hang"], producer_id=987_654, producer_epoch=3, base_sequence=0, transactional=True
        )
        answer = raw.produce("no-txn-id", 0, made_up)
        assert answer.error_code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED, answer
        plain = raw.produce("no-txn-id", 0, encode_batch([b"ok"]))
        assert plain.error_code == 0
        # nothing holds the last stable offset: read_committed sees the plain record
        assert raw.latest_offset("no-txn-id", 0, isolation=1) == 1
        assert raw.latest_offset("no-txn-id", 0) == 1
    finally:
        raw.close()
