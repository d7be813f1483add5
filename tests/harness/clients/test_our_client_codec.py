"""Our producer's requests and responses through the project's codec (kio), per protocol:
TV2 (Produce v12, EndTxn v5 with the bumped epoch, TxnOffsetCommit v5) and TV0/1 (Produce
<= v11, EndTxn <= v4, AddPartitionsToTxn v3); version negotiation; error classes; the
state machine; batches; librdkafka's group metadata."""

from __future__ import annotations

import struct
from typing import Any

import pytest

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import (
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    response_class,
)
from txnchaos.cluster.protocol.record_batch import crc_ok, parse_header
from txnchaos.harness.clients import errors
from txnchaos.harness.clients.batch import Record, encode_batch
from txnchaos.harness.clients.config import ProducerConfig
from txnchaos.harness.clients.connection import (
    API_END_TXN,
    API_PRODUCE,
    API_TXN_OFFSET_COMMIT,
    Features,
    NodeConnection,
    pick_version,
)
from txnchaos.harness.clients.errors import AbortableError, Action, StateError, UnsupportedError
from txnchaos.harness.clients.group import GroupMetadata
from txnchaos.harness.clients.metadata import ClusterView
from txnchaos.harness.clients.producer_state import ProducerState
from txnchaos.harness.clients.sender import Batch, Sender
from txnchaos.harness.clients.txn_manager import TxnRequests
from txnchaos.harness.clients.txn_state import TxnState, TxnStateMachine

CONFIG = ProducerConfig("127.0.0.1:9", transactional_id="t-1")


def node(versions: dict[int, tuple[int, int]]) -> NodeConnection:
    """A connection whose ApiVersions answer is ``versions`` (never connected)."""
    conn = NodeConnection(1, "127.0.0.1", 9, "test")
    conn.versions = versions
    return conn


NEW = node({API_PRODUCE: (3, 12), API_END_TXN: (0, 5), API_TXN_OFFSET_COMMIT: (0, 5)})
OLD = node({API_PRODUCE: (3, 11), API_END_TXN: (0, 3), API_TXN_OFFSET_COMMIT: (0, 3)})


def roundtrip(entity: Any) -> Any:
    frame = encode_request(7, entity, "test")
    _, decoded = decode_request(frame[4:])
    return decoded


def sender(state: ProducerState) -> Sender:
    async def add(_: set[tuple[str, int]]) -> None:
        return None

    return Sender(ClusterView("127.0.0.1:9", "test"), state, TxnStateMachine(), CONFIG, add)


def batch(state: ProducerState) -> Batch:
    ids = state.current
    base = state.take_sequence("t", 0, 2)
    payload = encode_batch(
        [Record(b"k", b"v0", (), 1000), Record(None, b"v1", (("h", b"x"),), 1001)],
        producer_id=ids.producer_id,
        producer_epoch=ids.epoch,
        base_sequence=base,
        transactional=True,
    )
    return Batch("t", 0, [], ids, base, payload, 0.0)


@pytest.mark.parametrize(("conn", "tv", "version"), [(NEW, 2, 12), (NEW, 0, 11), (OLD, 0, 11)])
def test_produce_request_version_follows_the_protocol(
    conn: NodeConnection, tv: int, version: int
) -> None:
    state = ProducerState()
    state.set_id(42, 3)
    request = sender(state).produce_request(conn, [batch(state)], tv)
    assert type(request).__version__ == version
    decoded = roundtrip(request)
    assert decoded.transactional_id == "t-1" and decoded.acks == -1
    records = decoded.topic_data[0].partition_data[0].records
    header = parse_header(records)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (42, 3, 0)
    assert header.is_transactional and header.records_count == 2
    assert crc_ok(records, 0, header)


def test_tv2_produce_is_refused_by_a_node_without_v12() -> None:
    state = ProducerState()
    state.set_id(1, 0)
    with pytest.raises(UnsupportedError):
        sender(state).produce_request(OLD, [batch(state)], 2)


def test_end_txn_v5_request_and_its_bumped_epoch() -> None:
    state = ProducerState()
    state.set_id(42, 3)
    txn = TxnRequests(ClusterView("127.0.0.1:9", "test"), state, CONFIG)
    request = txn.end_txn_request(NEW, commit=True, tv=2)
    assert type(request).__version__ == 5
    decoded = roundtrip(request)
    assert (decoded.producer_id, decoded.producer_epoch, decoded.committed) == (42, 3, True)
    # TV0/1 stays at v4 at most, even on a node that serves v5
    assert type(txn.end_txn_request(NEW, commit=False, tv=0)).__version__ == 4
    with pytest.raises(UnsupportedError):
        txn.end_txn_request(OLD, commit=True, tv=2)
    # the response of v5 carries the producer id and epoch to use next
    response = make(response_class(API_END_TXN, 5), error_code=0, producer_id=42, producer_epoch=4)
    frame = encode_response(9, response)
    correlation, decoded_response = decode_response(API_END_TXN, 5, frame[4:])
    assert correlation == 9
    assert (decoded_response.producer_id, decoded_response.producer_epoch) == (42, 4)


def test_txn_offset_commit_v5_round_trip() -> None:
    body = {
        "transactional_id": "t-1",
        "group_id": "g",
        "producer_id": 42,
        "producer_epoch": 3,
        "generation_id": 7,
        "member_id": "m-1",
        "group_instance_id": None,
        "topics": [
            {
                "name": "in",
                "partitions": [
                    {
                        "partition_index": 0,
                        "committed_offset": 10,
                        "committed_leader_epoch": -1,
                        "committed_metadata": "",
                    }
                ],
            }
        ],
    }
    decoded = roundtrip(NEW.build(API_TXN_OFFSET_COMMIT, body, cap=5))
    assert type(decoded).__version__ == 5
    assert (decoded.generation_id, decoded.member_id) == (7, "m-1")
    assert decoded.topics[0].partitions[0].committed_offset == 10
    assert type(OLD.build(API_TXN_OFFSET_COMMIT, body, cap=4)).__version__ == 3


def test_add_partitions_v3_round_trip() -> None:
    conn = node({24: (0, 5)})
    entity = conn.build(
        24,
        {
            "v3_and_below_transactional_id": "t-1",
            "v3_and_below_producer_id": 42,
            "v3_and_below_producer_epoch": 3,
            "v3_and_below_topics": [{"name": "t", "partitions": [0, 2]}],
        },
        cap=3,
    )
    decoded = roundtrip(entity)
    assert type(decoded).__version__ == 3
    assert list(decoded.v3_and_below_topics[0].partitions) == [0, 2]


def test_pick_version() -> None:
    assert pick_version(API_PRODUCE, (0, 13)) == 12
    assert pick_version(API_PRODUCE, (0, 13), cap=11) == 11
    assert pick_version(API_END_TXN, (0, 3)) == 3
    with pytest.raises(UnsupportedError):
        pick_version(API_PRODUCE, (0, 2))
    with pytest.raises(UnsupportedError):
        pick_version(API_PRODUCE, None)


def test_features_transaction_version() -> None:
    assert Features().transaction_version() == 0
    assert Features(finalized={"transaction.version": 2}).transaction_version() == 2


@pytest.mark.parametrize(
    ("table", "code", "expected"),
    [
        (errors.PRODUCE, errors.DUPLICATE_SEQUENCE_NUMBER, Action.OK),
        (errors.PRODUCE, errors.NOT_LEADER_OR_FOLLOWER, Action.REFRESH),
        (errors.PRODUCE, errors.NOT_ENOUGH_REPLICAS, Action.RETRY),
        (errors.PRODUCE, errors.INVALID_TXN_STATE, Action.ABORTABLE),
        (errors.PRODUCE, errors.TRANSACTION_ABORTABLE, Action.ABORTABLE),
        (errors.PRODUCE, errors.INVALID_PRODUCER_EPOCH, Action.ABORTABLE),
        (errors.PRODUCE, errors.UNKNOWN_PRODUCER_ID, Action.BUMP),
        (errors.PRODUCE, errors.PRODUCER_FENCED, Action.FATAL),
        (errors.PRODUCE, 9999, Action.ABORTABLE),
        (errors.END_TXN, errors.INVALID_PRODUCER_EPOCH, Action.FATAL),
        (errors.END_TXN, errors.INVALID_TXN_STATE, Action.FATAL),
        (errors.END_TXN, errors.CONCURRENT_TRANSACTIONS, Action.RETRY),
        (errors.END_TXN, errors.NOT_COORDINATOR, Action.COORDINATOR),
        (errors.END_TXN, errors.TRANSACTION_ABORTABLE, Action.ABORTABLE),
        (errors.ADD_PARTITIONS, errors.INVALID_PRODUCER_ID_MAPPING, Action.BUMP),
        (errors.TXN_OFFSET_COMMIT, errors.INVALID_TXN_STATE, Action.FATAL),
        (errors.TXN_OFFSET_COMMIT, errors.INVALID_PRODUCER_ID_MAPPING, Action.FATAL),
        (errors.TXN_OFFSET_COMMIT, errors.ILLEGAL_GENERATION, Action.ABORTABLE),
        (errors.INIT_PRODUCER_ID, errors.INVALID_PRODUCER_EPOCH, Action.FATAL),
        (errors.INIT_PRODUCER_ID, 9999, Action.FATAL),
    ],
)
def test_error_classes(table: dict[int, Action], code: int, expected: Action) -> None:
    assert errors.action(table, code) is expected


def test_state_machine() -> None:
    sm = TxnStateMachine()
    with pytest.raises(StateError):
        sm.transition(TxnState.IN_TRANSACTION)
    sm.transition(TxnState.INITIALIZING)
    sm.transition(TxnState.READY)
    sm.new_transaction(2)
    assert sm.book.tv == 2
    sm.abortable(AbortableError("x", errors.TRANSACTION_ABORTABLE), bump=False)
    assert sm.state is TxnState.ABORTABLE_ERROR
    with pytest.raises(AbortableError):
        sm.require(TxnState.IN_TRANSACTION)
    with pytest.raises(StateError):
        sm.transition(TxnState.COMMITTING)
    sm.transition(TxnState.ABORTING)
    sm.transition(TxnState.READY)
    sm.fail(errors.FatalError("fenced", errors.PRODUCER_FENCED))
    with pytest.raises(errors.FatalError):
        sm.transition(TxnState.IN_TRANSACTION)


def test_sequences_restart_with_each_epoch() -> None:
    state = ProducerState()
    state.set_id(5, 0)
    assert state.take_sequence("t", 0, 3) == 0
    assert state.take_sequence("t", 0, 2) == 3
    assert state.set_id(5, 1)  # TV2: EndTxn bumped the epoch
    assert state.next_sequence("t", 0) == 0
    assert not state.set_id(5, 1)
    assert state.previous[-1].epoch == 0
    state.take_sequence("t", 0, 1)
    state.rewind_sequence("t", 0, 0)
    assert state.next_sequence("t", 0) == 0
    assert state.bump_locally() and state.current.epoch == 2


def test_librdkafka_group_metadata() -> None:
    blob = b"CGMDv2:" + struct.pack("=i", 5) + b"g\x00member-1\x00\x01"
    assert GroupMetadata.from_librdkafka(blob) == GroupMetadata("g", 5, "member-1", None)
    with_instance = b"CGMDv2:" + struct.pack("=i", -1) + b"g\x00\x00\x00inst\x00"
    assert GroupMetadata.from_librdkafka(with_instance).group_instance_id == "inst"
    with pytest.raises(ValueError):
        GroupMetadata.from_librdkafka(b"nope")
