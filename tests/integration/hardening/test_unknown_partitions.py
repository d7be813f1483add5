"""A request naming thousands of partitions the broker does not have costs one view
refresh, not one Metadata round trip to the controller each (found by the typed fuzzer:
a 280 KB ListOffsets naming 10,000 partitions took the broker 45 s and sent the
controller 10,000 Metadata requests). Produce, ListOffsets, DeleteRecords and
WriteTxnMarkers refresh at most once per request, as Fetch and Metadata already did."""

from __future__ import annotations

import re
import urllib.request
from collections.abc import Iterator

import pytest

from tests.conftest import start_cluster
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.harness.launch.local import LocalCluster

from .support import client

pytestmark = pytest.mark.integration

COORDINATOR = 1001
PARTITIONS = 2_000
UNKNOWN_TOPIC_OR_PARTITION = 3


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    # the broker reaches the controller (on the coordinator node) over the network
    c = start_cluster(tmp_path_factory.mktemp("unknown"), brokers=1, coordinators=1)
    yield c
    c.down()


def metadata_requests(cluster: LocalCluster) -> float:
    """Metadata requests the controller's node has served so far."""
    node = next(n for n in cluster.state()["nodes"] if n["id"] == COORDINATOR)
    url = f"http://127.0.0.1:{node['metrics_port']}/metrics"
    with urllib.request.urlopen(url, timeout=10) as page:
        text = page.read().decode()
    match = re.search(r'^txnchaos_requests_total\{api="metadata"\} (\S+)$', text, re.M)
    return float(match.group(1)) if match else 0.0


def test_thousands_of_unknown_partitions_cost_one_refresh(cluster: LocalCluster) -> None:
    raw = client(cluster)
    try:
        before = metadata_requests(cluster)
        offsets = raw.request(
            2,
            2,
            replica_id=-1,
            isolation_level=0,
            topics=[
                {
                    "name": "no-such-topic",
                    "partitions": [
                        {"partition_index": i, "timestamp": -1} for i in range(PARTITIONS)
                    ],
                }
            ],
        )
        codes = {p.error_code for t in offsets.topics for p in t.partitions}
        assert codes == {UNKNOWN_TOPIC_OR_PARTITION}
        produced = raw.request(
            0,
            9,
            transactional_id=None,
            acks=1,
            timeout=5000,
            topic_data=[
                {
                    "name": "no-such-topic",
                    "partition_data": [
                        {"index": i, "records": encode_batch([b"x"])} for i in range(PARTITIONS)
                    ],
                }
            ],
        )
        codes = {p.error_code for t in produced.responses for p in t.partition_responses}
        assert codes == {UNKNOWN_TOPIC_OR_PARTITION}
        # two requests: two refreshes (plus the broker's own background ones), not 4,000
        assert metadata_requests(cluster) - before < 50
    finally:
        raw.close()
