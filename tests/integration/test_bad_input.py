"""Bad input gets Kafka's answer (an error, or a closed connection where Kafka closes
it) and the node keeps serving everyone else."""

from __future__ import annotations

import contextlib
import socket
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import start_cluster
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import decode_response, encode_request, request_class
from txnchaos.harness.launch.local import LocalCluster

pytestmark = pytest.mark.integration

UNSUPPORTED_VERSION = 35


@pytest.fixture(scope="module")
def fuzz_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = start_cluster(tmp_path_factory.mktemp("fuzz"), brokers=1)
    yield cluster
    cluster.down()


def node_address(cluster: LocalCluster) -> tuple[str, int]:
    host, _, port = cluster.state()["bootstrap"].partition(":")
    return host, int(port)


def exchange(addr: tuple[str, int], payload: bytes, timeout: float = 5.0) -> bytes | None:
    """Send raw bytes; return one response frame, or None when the node closed."""
    with socket.create_connection(addr, timeout=timeout) as sock:
        sock.sendall(payload)
        try:
            header = _recv_exact(sock, 4)
        except (ConnectionError, TimeoutError, OSError):
            return None
        if header is None:
            return None
        (size,) = struct.unpack(">i", header)
        return _recv_exact(sock, size)


def _recv_exact(sock: socket.socket, n: int) -> bytes | None:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            return None
        data += chunk
    return data


def api_versions_request(version: int = 3, correlation_id: int = 1) -> bytes:
    req = make(
        request_class(18, min(version, 3)), client_software_name="t", client_software_version="1"
    )
    frame = bytearray(encode_request(correlation_id, req, "t"))
    struct.pack_into(">h", frame, 6, version)  # claim the wanted version
    return bytes(frame)


def assert_serving(addr: tuple[str, int]) -> None:
    frame = exchange(addr, api_versions_request())
    assert frame is not None, "the node stopped answering"
    _, response = decode_response(18, 3, frame)
    assert response.error_code == 0
    assert {k.api_key for k in response.api_keys} >= {0, 1, 3, 18}


def test_unsupported_api_versions_version_gets_v0_error(fuzz_cluster: LocalCluster) -> None:
    addr = node_address(fuzz_cluster)
    frame = exchange(addr, api_versions_request(version=99, correlation_id=7))
    assert frame is not None
    correlation_id, response = decode_response(18, 0, frame)
    assert correlation_id == 7
    assert response.error_code == UNSUPPORTED_VERSION
    assert any(k.api_key == 0 for k in response.api_keys)


def test_api_versions_lists_exactly_what_is_served(fuzz_cluster: LocalCluster) -> None:
    addr = node_address(fuzz_cluster)
    _, response = decode_response(18, 3, exchange(addr, api_versions_request()) or b"")
    ranges = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
    # Produce from v0 as Kafka 4.x advertises it (KAFKA-18659); v12 is KIP-890 part 2,
    # v13 names topics by id (KIP-516)
    assert ranges[0] == (0, 13)
    assert ranges[1] == (4, 18)  # Fetch (v13+ by topic id)
    assert ranges[2] == (1, 11)  # ListOffsets: v8-v11 tiered storage's targets
    assert ranges[25] == (0, 4)  # AddOffsetsToTxn: v4 knows TRANSACTION_ABORTABLE
    assert 22 in ranges  # InitProducerId
    assert ranges[24] == (0, 5)  # AddPartitionsToTxn: v4+ is KIP-890's (server-only)
    assert ranges[57] == (0, 2)  # UpdateFeatures
    assert ranges[18] == (0, 4)  # ApiVersions
    assert ranges[61] == (0, 0) and ranges[65] == (0, 0)  # KIP-664 tooling


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(struct.pack(">i", 200 * 1024 * 1024) + b"\0" * 16, id="oversized-frame"),
        pytest.param(struct.pack(">i", -5), id="negative-size"),
        pytest.param(struct.pack(">ihhi", 8, 9999, 0, 1), id="unknown-api-key"),
        pytest.param(struct.pack(">ihhi", 8, 3, 99, 1), id="unknown-metadata-version"),
        pytest.param(struct.pack(">ihhi", 10, 3, 12, 1) + b"\xff\xff", id="truncated-body"),
        pytest.param(struct.pack(">i", 3) + b"abc", id="shorter-than-a-header"),
    ],
)
def test_bad_frames_close_only_their_connection(fuzz_cluster: LocalCluster, payload: bytes) -> None:
    addr = node_address(fuzz_cluster)
    with socket.create_connection(addr, timeout=5) as other:
        assert exchange(addr, payload) is None
        # An unrelated connection opened before still works, and so do new ones.
        other.sendall(api_versions_request())
        assert _recv_exact(other, 4) is not None
    assert_serving(addr)


def _valid_frames() -> list[bytes]:
    topics = [{"name": "fuzz-topic"}]
    return [
        api_versions_request(),
        encode_request(
            2,
            make(
                request_class(3, 12),
                topics=topics,
                allow_auto_topic_creation=False,
                include_topic_authorized_operations=False,
            ),
            "f",
        ),
        encode_request(3, make(request_class(10, 4), key_type=0, coordinator_keys=["g"]), "f"),
        encode_request(
            4,
            make(
                request_class(2, 7),
                replica_id=-1,
                isolation_level=0,
                topics=[
                    {"name": "fuzz-topic", "partitions": [{"partition_index": 0, "timestamp": -1}]}
                ],
            ),
            "f",
        ),
    ]


mutations = st.tuples(
    st.sampled_from(range(4)),
    st.lists(st.tuples(st.integers(4, 200), st.integers(0, 255)), max_size=6),
    st.integers(0, 3),
    st.binary(max_size=16),
)


def _mutate(frames: list[bytes], choice: tuple) -> bytes:
    index, flips, cut, extra = choice
    frame = bytearray(frames[index])
    for pos, value in flips:
        if pos < len(frame):
            frame[pos] = value
    body = bytes(frame[4:])
    if cut:
        body = body[: max(0, len(body) - cut * 3)]
    body += extra
    return struct.pack(">i", len(body)) + body


@settings(max_examples=300, deadline=None)
@given(mutations)
def test_decoder_rejects_mutations_cleanly(choice: tuple) -> None:
    """The decoder either decodes a mutated frame or raises ProtocolError/UnsupportedApi,
    never anything else."""
    from txnchaos.cluster.protocol.codec import ProtocolError, decode_request

    frame = _mutate(_valid_frames(), choice)[4:]
    with contextlib.suppress(ProtocolError):
        decode_request(frame)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(mutations)
def test_live_node_survives_mutated_frames(fuzz_cluster: LocalCluster, choice: tuple) -> None:
    addr = node_address(fuzz_cluster)
    with contextlib.suppress(OSError):
        exchange(addr, _mutate(_valid_frames(), choice), timeout=2.0)
    assert_serving(addr)


# ---- issue 20's reproductions ---------------------------------------------------------
POLICY_VIOLATION = 44
MEMBER_ID_REQUIRED = 79


def node_pid(cluster: LocalCluster) -> int:
    return int(cluster.state()["nodes"][0]["pid"])


def test_a_compact_count_of_four_billion_closes_only_its_connection(
    fuzz_cluster: LocalCluster,
) -> None:
    """The issue's 25-byte Metadata v9 frame made kio reserve ~34 GB and abort the node."""
    addr = node_address(fuzz_cluster)
    frame = bytes.fromhex("000000150003000900000001000570726f626500feffffff0f")
    assert exchange(addr, frame) is None
    assert Path(f"/proc/{node_pid(fuzz_cluster)}").exists()
    assert_serving(addr)


@pytest.mark.parametrize("validate_only", [True, False])
@pytest.mark.parametrize("partitions", [2**31 - 1, 134_217_728, 10_001])
def test_create_topics_with_too_many_partitions_is_a_policy_violation(
    fuzz_cluster: LocalCluster, validate_only: bool, partitions: int
) -> None:
    addr = node_address(fuzz_cluster)
    request = make(
        request_class(19, 7),
        topics=[{"name": "huge", "num_partitions": partitions, "replication_factor": 1}],
        timeout=5000,
        validate_only=validate_only,
    )
    frame = exchange(addr, encode_request(11, request, "t"), timeout=30)
    assert frame is not None
    _, response = decode_response(19, 7, frame)
    (topic,) = response.topics
    assert topic.error_code == POLICY_VIOLATION
    assert topic.error_message == "Excessively large number of partitions per request."


def test_ten_thousand_partitions_may_be_validated(fuzz_cluster: LocalCluster) -> None:
    addr = node_address(fuzz_cluster)
    request = make(
        request_class(19, 7),
        topics=[{"name": "big-enough", "num_partitions": 10_000, "replication_factor": 1}],
        timeout=5000,
        validate_only=True,
    )
    _, response = decode_response(19, 7, exchange(addr, encode_request(12, request, "t")) or b"")
    assert response.topics[0].error_code == 0


def test_metadata_v1_for_an_empty_topic_name_is_answered(fuzz_cluster: LocalCluster) -> None:
    addr = node_address(fuzz_cluster)
    request = make(request_class(3, 1), topics=[{"name": ""}])
    frame = exchange(addr, encode_request(13, request, "t"))
    assert frame is not None, "the node closed the connection (a handler failed)"
    _, response = decode_response(3, 1, frame)
    assert response.topics[0].error_code == 17  # INVALID_TOPIC_EXCEPTION


def test_join_group_with_the_longest_client_id_is_answered(fuzz_cluster: LocalCluster) -> None:
    addr = node_address(fuzz_cluster)
    request = make(
        request_class(11, 5),
        group_id="g-long-client",
        session_timeout=10_000,
        rebalance_timeout=10_000,
        member_id="",
        protocol_type="consumer",
        protocols=[{"name": "range", "metadata": b""}],
    )
    frame = exchange(addr, encode_request(14, request, "c" * 32_767))
    assert frame is not None, "the node closed the connection (the response did not encode)"
    _, response = decode_response(11, 5, frame)
    assert response.error_code == MEMBER_ID_REQUIRED
    assert response.member_id.startswith("c" * 255 + "-")


# Last in this module: after every bad input above.
def test_node_log_has_no_tracebacks(fuzz_cluster: LocalCluster) -> None:
    log = Path(fuzz_cluster.data_dir) / "node-1" / "node.log"
    assert "Traceback" not in log.read_text()
