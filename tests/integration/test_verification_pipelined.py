"""KIP-890 part 1 with pipelined Produce requests (librdkafka sends one per partition, all
at once): the broker verifies the requests waiting behind the first in the same
AddPartitionsToTxn VerifyOnly request, and every request still gets its own verdict."""

from __future__ import annotations

import re
import socket
import struct
import time
import urllib.request
from pathlib import Path

import pytest

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import decode_response, encode_request, request_class
from txnchaos.cluster.protocol.records import encode_batch

from ..conftest import start_cluster
from .raw_client import RawClient, address
from .test_produce_consume import create_topic
from .test_txn_verification import add_partition, end_txn, init_transactional

pytestmark = pytest.mark.integration

TOPIC = "verified"
INVALID_TXN_STATE = 48


def produce_frame(correlation_id: int, txn_id: str, pid: int, epoch: int, partition: int) -> bytes:
    batch = encode_batch(
        [b"p%d" % partition],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=0,
        transactional=True,
    )
    request = make(
        request_class(0, 10),
        transactional_id=txn_id,
        acks=-1,
        timeout=10_000,
        topic_data=[{"name": TOPIC, "partition_data": [{"index": partition, "records": batch}]}],
    )
    return encode_request(correlation_id, request, "pipelining-client")


def read_frame(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            assert chunk, "connection closed"
            data += chunk
        return data

    (size,) = struct.unpack(">i", exactly(4))
    return exactly(size)


def wait_until_stable(client: RawClient, partition: int, end: int) -> None:
    """Until the commit marker is written (the coordinator writes markers after EndTxn
    answered): the last stable offset reaches the log's end, so nothing was left open."""
    deadline = time.monotonic() + 30
    while client.latest_offset(TOPIC, partition, isolation=1) != end:
        assert time.monotonic() < deadline, f"partition {partition} still has an open transaction"
        time.sleep(0.05)


def add_partitions_served(metrics_port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    m = re.search(r'^txnchaos_requests_total\{api="add_partitions_to_txn"\} (\S+)$', text, re.M)
    return float(m.group(1)) if m else 0.0


def test_pipelined_produces_are_verified_together(tmp_path: Path) -> None:
    """Three first writes sent at once on one connection, two to added partitions and one
    to a partition never added: the added ones are written, the other refused, and the
    coordinator is asked twice (once for all three, once more for the refused one) instead
    of three times."""
    cluster = start_cluster(tmp_path / "c", brokers=1, settings=["transaction.version=1"])
    try:
        state = cluster.state()
        create_topic(state["bootstrap"], TOPIC, 3)
        host, port = address(state["bootstrap"])
        client = RawClient(host, port)
        try:
            pid, epoch = init_transactional(client, "pipelined")
            add_partition(client, "pipelined", pid, epoch, 0)
            add_partition(client, "pipelined", pid, epoch, 1)
            metrics_port = state["nodes"][0]["metrics_port"]
            served_before = add_partitions_served(metrics_port)
            with socket.create_connection((host, port), timeout=30) as sock:
                frames = [produce_frame(i, "pipelined", pid, epoch, i) for i in range(3)]
                sock.sendall(b"".join(frames))  # pipelined, as librdkafka does
                answers = [decode_response(0, 10, read_frame(sock)) for _ in frames]
            assert [cid for cid, _ in answers] == [0, 1, 2]
            codes = [int(r.responses[0].partition_responses[0].error_code) for _, r in answers]
            assert codes == [0, 0, INVALID_TXN_STATE]
            assert add_partitions_served(metrics_port) - served_before == 2
            assert end_txn(client, "pipelined", pid, epoch, True) == 0
            for partition, end in ((0, 2), (1, 2), (2, 0)):  # record and marker; nothing
                wait_until_stable(client, partition, end)
                assert client.latest_offset(TOPIC, partition) == end
        finally:
            client.close()
    finally:
        cluster.down()
