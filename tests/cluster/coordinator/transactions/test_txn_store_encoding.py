"""The transaction log's hand-written record encoder and the allocation-saving transit
builder agree with the generic code they replace."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from txnchaos.cluster.coordinator.transactions import store
from txnchaos.cluster.coordinator.transactions.metadata import TransactionMetadata, TxnTransit
from txnchaos.cluster.coordinator.transactions.state import TxnState, is_legal

i16 = st.integers(-1, 2**15 - 1)
i64 = st.integers(-1, 2**63 - 1)
topics = st.text(max_size=20)  # any text: quotes, backslashes, control and non-ASCII characters
transits = st.builds(
    TxnTransit,
    state=st.sampled_from(list(TxnState)),
    producer_id=i64,
    last_producer_id=i64,
    producer_epoch=i16,
    last_producer_epoch=i16,
    txn_timeout_ms=st.integers(0, 2**31 - 1),
    partitions=st.frozensets(st.tuples(topics, st.integers(0, 2**31 - 1)), max_size=8),
    txn_start_ms=i64,
    txn_last_update_ms=i64,
    client_transaction_version=st.integers(0, 2),
    next_producer_id=i64,
    next_producer_epoch=i16,
    two_phase_commit=st.booleans(),
)


@settings(max_examples=300, deadline=None)
@given(transits, st.sampled_from([0, 1]))
def test_encode_transit_is_the_generic_json(transit: TxnTransit, version: int) -> None:
    fast = store.encode_transit(transit, version)
    generic = transit.to_json(version)
    assert fast == json.dumps(generic, separators=(",", ":"), ensure_ascii=False).encode()
    back = TxnTransit.from_json(json.loads(fast))
    if version == 1:
        assert back == transit
    else:  # version 0 has no KIP-890 fields: they read back as their defaults
        assert back == transit._replace(client_transaction_version=0, next_producer_id=-1)


@settings(max_examples=100, deadline=None)
@given(transits, st.sampled_from([None, 0, 1, 2]))
def test_value_version_never_loses_a_field(transit: TxnTransit, level: int | None) -> None:
    record = store.txn_record("tx", transit, level)
    value = json.loads(record.value or b"")
    assert value.get("v", 0) == (1 if (level or 0) >= 1 or transit.needs_value_v1 else 0)
    assert TxnTransit.from_json(value) == transit


def test_records_written_before_value_versions_still_read() -> None:
    """A record as written before KIP-890 (no "v", and older still: no tv/next/2pc)."""
    old = {
        "state": "CompleteCommit",
        "pid": 7,
        "last_pid": 7,
        "epoch": 3,
        "last_epoch": 2,
        "timeout_ms": 60000,
        "partitions": [],
        "start_ms": 10,
        "update_ms": 11,
    }
    t = TxnTransit.from_json(old)
    assert (t.producer_id, t.producer_epoch, t.client_transaction_version) == (7, 3, 0)
    assert (t.next_producer_id, t.next_producer_epoch, t.two_phase_commit) == (-1, -1, False)
    full = dict(old, tv=2, next_pid=9, next_epoch=-1, two_pc=False)
    assert TxnTransit.from_json(full).next_producer_id == 9
    with pytest.raises(ValueError):
        TxnTransit.from_json(dict(old, v=2))  # a future version is refused, not misread
    with pytest.raises(ValueError):
        store.encode_transit(t, 2)


@settings(max_examples=200, deadline=None)
@given(
    transits.filter(lambda t: t.state != TxnState.DEAD),
    st.sampled_from(list(TxnState)),
    st.integers(0, 2**40),
)
def test_transit_builder_matches_replace_of_the_snapshot(
    current: TxnTransit, target: TxnState, now_ms: int
) -> None:
    """``_transit`` builds what ``snapshot()._replace(...)`` would: every
    field of TxnTransit (a field added later included) comes from the metadata."""
    md = TransactionMetadata.restore("tx", current)
    if not is_legal(md.state, target) or (target != TxnState.DEAD and md.producer_epoch < 0):
        return
    changes = {"txn_last_update_ms": now_ms}
    expected = md.snapshot()._replace(state=target, **changes)
    assert md._transit(target, **changes) == expected
    with_partitions = expected._replace(partitions=frozenset({("t", 1)}))
    assert (
        md._transit(target, partitions=frozenset({("t", 1)}), txn_last_update_ms=now_ms)
        == with_partitions
    )


def test_txn_record_uses_the_fast_encoder() -> None:
    transit = TxnTransit(
        TxnState.ONGOING, 7, -1, 0, -1, 60_000, frozenset({("a", 1), ("a", 0)}), 5, 6
    )
    record = store.txn_record("tx", transit)
    assert record.key == b'["txn","tx"]'
    assert json.loads(record.value or b"")["partitions"] == [["a", 0], ["a", 1]]
