"""Issue 35, item 5, on a SASL cluster without an authorizer: BrokerRegistration,
BrokerHeartbeat and AllocateProducerIds are the nodes' own principal's. A client that
logged in as anyone else gets CLUSTER_AUTHORIZATION_FAILED (its registration of a ghost
broker would leave new partitions leaderless), and everything else it may still do (no
authorizer: every authenticated principal is allowed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import start_cluster
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.cluster.security.sasl import SaslCredentials
from txnchaos.harness.launch.local import LocalCluster

from ..raw_client import RawClient
from .support import create_topic

pytestmark = pytest.mark.integration

PASSWORDS = {"node": "node-pw", "alice": "alice-pw"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    ['username="node" password="node-pw"', *(f'user_{u}="{p}"' for u, p in PASSWORDS.items())]
)
CLUSTER_AUTHORIZATION_FAILED = 31
COORDINATOR = 1001  # the controller's node


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # the broker registers with the controller over the network, as the nodes' principal
    c = start_cluster(
        tmp_path_factory.mktemp("sasl-no-authorizer"),
        brokers=1,
        coordinators=1,
        settings=[
            "listener.security.protocol=SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN",
            f"sasl.jaas.config={JAAS};",
        ],
    )
    yield c
    c.down()


def login(cluster: LocalCluster, node_id: int, user: str, client_id: str) -> RawClient:
    port = next(n["port"] for n in cluster.state()["nodes"] if n["id"] == node_id)
    return RawClient("127.0.0.1", port, client_id, SaslCredentials("PLAIN", user, PASSWORDS[user]))


@pytest.mark.parametrize("client_id", ["alice-app", "txnchaos-node-1", "txnchaos-admin"])
def test_node_apis_are_refused_to_a_logged_in_client(cluster: LocalCluster, client_id: str) -> None:
    """Whatever client id it claims (the nodes' own, an operator's): with SASL the
    principal is the identity, and only the nodes' principal may call these APIs."""
    alice = login(cluster, COORDINATOR, "alice", client_id)
    try:
        registration = alice.request(
            62,
            0,
            broker_id=7,
            cluster_id="x",
            incarnation_id=None,
            listeners=[
                {"name": "PLAINTEXT", "host": "127.0.0.1", "port": 1, "security_protocol": 0}
            ],
            features=[],
            rack=None,
        )
        assert registration.error_code == CLUSTER_AUTHORIZATION_FAILED, registration
        heartbeat = alice.request(
            63, 0, broker_id=1, broker_epoch=0, current_metadata_offset=0, want_fence=False,
            want_shut_down=False,
        )  # fmt: skip
        assert heartbeat.error_code == CLUSTER_AUTHORIZATION_FAILED
        blocks = alice.request(67, 0, broker_id=1, broker_epoch=0)
        assert blocks.error_code == CLUSTER_AUTHORIZATION_FAILED
        # the rest is hers: no authorizer, and the real broker still leads what she creates
        assert create_topic(alice, f"after-{client_id}", partitions=2).error_code == 0
    finally:
        alice.close()
    producer = login(cluster, 1, "alice", client_id)
    try:
        for partition in range(2):
            answer = producer.produce(f"after-{client_id}", partition, encode_batch([b"x"]))
            assert answer.error_code == 0, answer
    finally:
        producer.close()
