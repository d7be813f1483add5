"""Issue 35 items 6, 7 and 12: valid requests with hostile values get Kafka's refusal
and the node keeps serving."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.conftest import start_cluster
from txnchaos.harness.launch.local import LocalCluster

from .support import controller_client

pytestmark = pytest.mark.integration

INVALID_REGULAR_EXPRESSION = 128


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("refusals"), brokers=2, coordinators=1)
    yield c
    c.down()


def list_transactions(cluster: LocalCluster, pattern: str) -> object:
    coordinator = controller_client(cluster)
    try:
        return coordinator.request(
            66,
            2,
            state_filters=[],
            producer_id_filters=[],
            duration_filter=-1,
            transactional_id_pattern=pattern,
        )
    finally:
        coordinator.close()


def test_list_transactions_refuses_a_pattern_re2j_refuses(cluster: LocalCluster) -> None:
    answer = list_transactions(cluster, "a{99999999999}")  # a traceback closed the connection
    assert answer.error_code == INVALID_REGULAR_EXPRESSION, answer


def test_list_transactions_matches_a_catastrophic_pattern(cluster: LocalCluster) -> None:
    coordinator = controller_client(cluster)
    try:
        init = coordinator.request(
            22,
            4,
            transactional_id="a" * 20,
            transaction_timeout=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert init.error_code == 0
    finally:
        coordinator.close()
    answer = list_transactions(cluster, "(a+)+b")
    assert answer.error_code == 0 and answer.transaction_states == ()
    answer = list_transactions(cluster, "(a+)+")
    assert [t.transactional_id for t in answer.transaction_states] == ["a" * 20]


@pytest.mark.parametrize("name", ["__consumer_offsets", "__transaction_state"])
def test_internal_topic_names_are_reserved(cluster: LocalCluster, name: str) -> None:
    from .support import client, create_topic

    raw = client(cluster)
    try:
        answer = raw.request(
            3,
            12,
            topics=[{"name": name, "topic_id": None}],
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        )
        assert answer.topics[0].error_code != 0 and answer.topics[0].partitions == ()
    finally:
        raw.close()
    admin = controller_client(cluster)
    try:
        assert create_topic(admin, name).error_code == 36  # TOPIC_ALREADY_EXISTS
    finally:
        admin.close()


def test_node_apis_are_refused_to_clients(cluster: LocalCluster) -> None:
    """Item 5: BrokerRegistration, BrokerHeartbeat and AllocateProducerIds are the nodes'
    (a client's registration of a ghost broker left new partitions leaderless for good)."""
    from .support import create_topic, produce_to_leader

    admin = controller_client(cluster, client_id="txnchaos-admin-probe")  # an operator too
    try:
        registration = admin.request(
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
        assert registration.error_code == 31, registration  # CLUSTER_AUTHORIZATION_FAILED
        heartbeat = admin.request(
            63, 0, broker_id=1, broker_epoch=0, current_metadata_offset=0, want_fence=False,
            want_shut_down=False,
        )  # fmt: skip
        assert heartbeat.error_code == 31
        blocks = admin.request(67, 0, broker_id=1, broker_epoch=0)
        assert blocks.error_code == 31
        assert create_topic(admin, "after-ghost", partitions=4).error_code == 0
    finally:
        admin.close()
    for p in range(4):
        assert produce_to_leader(cluster, "after-ghost", p).error_code == 0


def test_describe_configs_answers_a_name_of_32767_characters(cluster: LocalCluster) -> None:
    """Item 12: the error reply quoted the whole name and could not be encoded."""
    from .support import client

    raw = client(cluster)
    try:
        answer = raw.request(
            32,
            1,  # non-flexible: a STRING of at most 32,767 bytes
            resources=[
                {"resource_type": 2, "resource_name": "n" * 32767, "configuration_keys": None}
            ],
            include_synonyms=False,
            include_documentation=False,
        )
        # INVALID_TOPIC_EXCEPTION, as Kafka's (longer than 249 characters), the name cut
        result = answer.results[0]
        assert result.error_code == 17, result
        assert result.error_message.startswith("Topic name is invalid: the length of 'nnn")
        assert "(32767 characters)' is longer than the max allowed length 249" in (
            result.error_message
        )
    finally:
        raw.close()


def test_an_unknown_isolation_level_is_refused(cluster: LocalCluster) -> None:
    """Item 12: isolation level 7 was served as read_uncommitted; Kafka refuses it."""
    from txnchaos.cluster.net.client import PeerUnavailable

    from .support import client

    raw = client(cluster)
    try:
        with pytest.raises(PeerUnavailable):
            raw.request(
                1,
                12,
                replica_id=-1,
                max_wait=0,
                min_bytes=1,
                max_bytes=1024,
                isolation_level=7,
                session_id=0,
                session_epoch=-1,
                topics=[],
                forgotten_topics_data=[],
                rack_id="",
            )
    finally:
        raw.close()


def test_a_newline_in_a_transactional_id_forges_no_log_line(cluster: LocalCluster) -> None:
    """Item 12: ids are written to the node's log escaped."""
    coordinator = controller_client(cluster)
    try:
        init = coordinator.request(
            22,
            4,
            transactional_id="evil\n2026-01-01 00:00:00,000 node-1001 ERROR forged: x",
            transaction_timeout=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert init.error_code == 0
    finally:
        coordinator.close()
    spec = cluster.layout.controller_node()
    log_text = (cluster.data_dir / f"node-{spec.id}" / "node.log").read_text()
    assert "evil\\n2026" in log_text
    assert not any(line.startswith("2026-01-01") for line in log_text.splitlines())


def test_importing_the_node_writes_no_hypothesis_directory(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Item 12: kio imported Hypothesis, which writes .hypothesis/ into the working dir."""
    import subprocess
    import sys

    subprocess.run(
        [sys.executable, "-c", "import txnchaos.harness.cli, txnchaos.cluster.node"],
        cwd=tmp_path,
        check=True,
    )
    assert list(tmp_path.iterdir()) == []
