"""Protocol-level helpers for tests that send exact requests (no client library)."""

from __future__ import annotations

import asyncio
from typing import Any

from txnchaos.cluster.net.client import PeerConnection
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.security.sasl import SaslCredentials


def address(bootstrap: str) -> tuple[str, int]:
    host, _, port = bootstrap.split(",")[0].rpartition(":")
    return host, int(port)


AS_NODE = "txnchaos-node-test"
"""The client id of a test that plays a node (writes markers like a coordinator, sends
AddPartitionsToTxn v4+ like a broker): server-only APIs accept it."""


class RawClient:
    """A synchronous facade over the node-to-node client, for tests."""

    def __init__(
        self,
        host: str,
        port: int,
        client_id: str = "txnchaos-test",
        sasl: SaslCredentials | None = None,
    ) -> None:
        self.loop = asyncio.new_event_loop()
        self.conn = PeerConnection(host, port, client_id=client_id, sasl=sasl)

    def request(
        self, api_key: int, version: int, body: dict[str, Any] | None = None, **fields: Any
    ) -> Any:
        req = make(request_class(api_key, version), body, **fields)
        return self.loop.run_until_complete(self.conn.request(req, timeout=30))

    def close(self) -> None:
        self.loop.run_until_complete(self.conn.close())
        self.loop.close()

    # conveniences
    def init_producer_id(self) -> tuple[int, int]:
        r = self.request(
            22,
            4,
            transactional_id=None,
            transaction_timeout=60000,
            producer_id=-1,
            producer_epoch=-1,
        )
        assert r.error_code == 0, r
        return r.producer_id, r.producer_epoch

    def produce(
        self,
        topic: str,
        partition: int,
        records: bytes,
        acks: int = -1,
        transactional_id: str | None = None,
    ) -> Any:
        r = self.request(
            0,
            10,
            transactional_id=transactional_id,
            acks=acks,
            timeout=10000,
            topic_data=[
                {"name": topic, "partition_data": [{"index": partition, "records": records}]}
            ],
        )
        return r.responses[0].partition_responses[0]

    def latest_offset(self, topic: str, partition: int, isolation: int = 0) -> int:
        r = self.request(
            2,
            7,
            replica_id=-1,
            isolation_level=isolation,
            topics=[
                {
                    "name": topic,
                    "partitions": [
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": -1}
                    ],
                }
            ],
        )
        p = r.topics[0].partitions[0]
        assert p.error_code == 0, p
        return p.offset
