"""``txnchaos transactions find-hanging`` with a broker down: the search goes on without
it (it used to stop at the first broker that did not answer, "cluster not reachable"),
finds the hanging transaction on the live broker, names on stderr what it could not look
at, and exits 1 (a partial answer)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from txnchaos.harness.cli import main
from txnchaos.harness.launch.local import LocalCluster

from ..conftest import start_cluster
from .raw_client import RawClient, address
from .test_produce_consume import create_topic
from .test_transactions_tool import HOUR_MS, TOPIC, init_producer, produce_without_add

pytestmark = pytest.mark.integration


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """Two brokers (node 1 coordinates); old-client rules: no verification."""
    c = start_cluster(
        tmp_path / "c",
        brokers=2,
        settings=["transaction.version=0", "transaction.partition.verification.enable=false"],
    )
    create_topic(c.state()["bootstrap"], TOPIC, 2)
    yield c
    c.down()


def leaders(bootstrap: str) -> dict[int, int]:
    """partition -> leader node id"""
    seed = RawClient(*address(bootstrap))
    try:
        md = seed.request(
            3,
            12,
            topics=[{"name": TOPIC, "topic_id": None}],
            allow_auto_topic_creation=False,
            include_topic_authorized_operations=False,
        )
    finally:
        seed.close()
    return {int(p.partition_index): int(p.leader_id) for p in md.topics[0].partitions}


def test_find_hanging_goes_on_without_a_dead_broker(cluster: LocalCluster) -> None:
    bootstrap = str(cluster.state()["bootstrap"])
    by_leader = {leader: p for p, leader in leaders(bootstrap).items()}
    assert set(by_leader) == {1, 2}, by_leader  # one partition on each broker
    live, dead = by_leader[1], by_leader[2]
    pid, epoch = init_producer(bootstrap, "stuck")
    start = produce_without_add(bootstrap, "stuck", pid, epoch, live, int(time.time() * 1000)
                                - 2 * HOUR_MS)  # fmt: skip
    cluster.kill_node(2)
    result = CliRunner().invoke(
        main,
        ["transactions", "find-hanging", "--bootstrap", bootstrap, "--topic", TOPIC,
         "--max-transaction-timeout", "60", "--json"],
    )  # fmt: skip
    assert result.exit_code == 1, (result.stdout, result.stderr)
    found = json.loads(result.stdout)
    assert [(h["partition"], h["producer_id"], h["start_offset"]) for h in found] == [
        (live, pid, start)
    ]
    assert f"{TOPIC}-{dead}" in result.stderr or "broker 2 did not answer" in result.stderr
