"""Issue 35 item 8: a Fetch's max_bytes is cut to fetch.max.bytes, as Kafka bounds it
(responses are built in memory: ten slow clients asking for INT32_MAX bytes of a 99 MB
partition took a node from 57 MB to 964 MB)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import start_cluster
from txnchaos.cluster.protocol.records import encode_batch

from .support import client, controller_client, create_topic

pytestmark = pytest.mark.integration

INT32_MAX = 2**31 - 1


def test_fetch_max_bytes_bounds_a_response(tmp_path: Path) -> None:
    cluster = start_cluster(tmp_path / "c", brokers=1, settings=["fetch.max.bytes=4096"])
    admin = controller_client(cluster)
    assert create_topic(admin, "big").error_code == 0
    admin.close()
    raw = client(cluster)
    try:
        for i in range(20):
            assert raw.produce("big", 0, encode_batch([bytes([i]) * 1000])).error_code == 0
        answer = raw.request(
            1,
            12,
            replica_id=-1,
            max_wait=0,
            min_bytes=1,
            max_bytes=INT32_MAX,
            isolation_level=0,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": "big",
                    "partitions": [
                        {
                            "partition": 0,
                            "current_leader_epoch": -1,
                            "fetch_offset": 0,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": INT32_MAX,
                        }
                    ],
                }
            ],
            forgotten_topics_data=[],
            rack_id="",
        )
        records = answer.responses[0].partitions[0].records
        assert 1000 < len(records) <= 4096  # whole batches, at most fetch.max.bytes
    finally:
        raw.close()
        cluster.down()
