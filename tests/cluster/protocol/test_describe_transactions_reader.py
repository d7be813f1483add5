"""DescribeTransactions responses decode with TransactionStartTimeMs -1 (no transaction in
progress, KIP-664), which kio's datetime reader refuses; otherwise exactly as kio reads them."""

from __future__ import annotations

import pytest

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import (
    _reader,
    decode_response,
    encode_response,
    response_class,
)


def _response(start_ms: int, *, with_unknown_id: bool = True) -> object:
    unknown = {
        "error_code": 105,
        "transactional_id": "gone",
        "transaction_state": "",
        "transaction_timeout": 0,
        "transaction_start_time": -1,
        "producer_id": -1,
        "producer_epoch": -1,
        "topics": [],
    }
    return make(
        response_class(65, 0),
        throttle_time=3,
        transaction_states=[
            {
                "error_code": 0,
                "transactional_id": "tx",
                "transaction_state": "Ongoing" if start_ms >= 0 else "Empty",
                "transaction_timeout": 60_000,
                "transaction_start_time": start_ms,
                "producer_id": 1234,
                "producer_epoch": 7,
                "topics": [{"topic": "t", "partitions": [2, 0]}],
            },
            *([unknown] if with_unknown_id else []),
        ],
    )


def test_a_start_time_is_read_as_kio_reads_it() -> None:
    sent = _response(1_700_000_000_123, with_unknown_id=False)
    frame = encode_response(9, sent)[4:]
    correlation, got = decode_response(65, 0, frame)
    assert correlation == 9 and got == sent
    cls = response_class(65, 0)
    _, used = _reader(cls.__header_schema__)(frame, 0)
    assert _reader(cls)(frame, used)[0] == got


def test_no_transaction_in_progress_reads_as_none() -> None:
    frame = encode_response(1, _response(-1))[4:]
    cls = response_class(65, 0)
    _, used = _reader(cls.__header_schema__)(frame, 0)
    with pytest.raises(Exception, match="negative"):
        _reader(cls)(frame, used)  # kio alone
    _, got = decode_response(65, 0, frame)
    first, second = got.transaction_states
    assert first.transaction_start_time is None and first.producer_id == 1234
    assert [(t.topic, t.partitions) for t in first.topics] == [("t", (2, 0))]
    assert int(second.error_code) == 105 and second.transaction_start_time is None
