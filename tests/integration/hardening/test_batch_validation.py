"""Issue 35, item 9, on a real node: a batch whose records contradict its header is
refused with Kafka's error and moves nothing (the reported batch claimed 2^31-1 records
and moved the high watermark to 2,147,483,647); valid batches of every codec are appended.
librdkafka's own batches of every codec are in test_produce_consume."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

from tests.conftest import start_cluster
from txnchaos.cluster.protocol.compression import GZIP, LZ4, SNAPPY, ZSTD
from txnchaos.cluster.protocol.record_batch import CRC_OFFSET, compute_crc
from txnchaos.cluster.protocol.records import encode_batch
from txnchaos.harness.launch.local import LocalCluster

from .support import controller_client, create_topic, leader_client

pytestmark = pytest.mark.integration

CORRUPT_MESSAGE = 2
INVALID_RECORD = 87
RECORDS_COUNT_OFFSET = 57


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(tmp_path_factory.mktemp("batches"), brokers=1)
    admin = controller_client(c)
    assert create_topic(admin, "batches").error_code == 0
    admin.close()
    yield c
    c.down()


def with_count(batch: bytes, count: int) -> bytes:
    """``batch`` claiming ``count`` records, its offset range and CRC made to agree."""
    buf = bytearray(batch)
    struct.pack_into(">i", buf, 23, count - 1)  # last offset delta
    struct.pack_into(">i", buf, RECORDS_COUNT_OFFSET, count)
    struct.pack_into(">I", buf, CRC_OFFSET, compute_crc(buf, 0, len(buf)))
    return bytes(buf)


def test_a_batch_claiming_more_records_than_it_holds_moves_nothing(cluster: LocalCluster) -> None:
    raw = leader_client(cluster, "batches", 0)
    try:
        before = raw.latest_offset("batches", 0)
        for codec in (0, ZSTD):
            liar = with_count(encode_batch([b"one"], compression=codec), 2**31 - 1)
            answer = raw.produce("batches", 0, liar)
            assert answer.error_code == INVALID_RECORD, answer
        garbage = with_count(encode_batch([b"x" * 64], compression=LZ4), 1)
        garbage = garbage[:70] + bytes(len(garbage) - 70)
        garbage = with_count(garbage, 1)
        assert raw.produce("batches", 0, garbage).error_code == CORRUPT_MESSAGE
        assert raw.latest_offset("batches", 0) == before
        for codec in (0, GZIP, SNAPPY, LZ4, ZSTD):
            answer = raw.produce("batches", 0, encode_batch([b"a", b"b"], compression=codec))
            assert answer.error_code == 0, (codec, answer)
        assert raw.latest_offset("batches", 0) == before + 10
    finally:
        raw.close()
