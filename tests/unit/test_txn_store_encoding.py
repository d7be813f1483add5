"""The transaction log's hand-written record encoder and the allocation-saving transit
builder agree with the generic code they replace."""

from __future__ import annotations

import json

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
@given(transits)
def test_encode_transit_is_the_generic_json(transit: TxnTransit) -> None:
    fast = store.encode_transit(transit)
    assert fast == json.dumps(transit.to_json(), separators=(",", ":"), ensure_ascii=False).encode()
    assert TxnTransit.from_json(json.loads(fast)) == transit


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
