"""Reading a DescribeTransactions v0 response body (API 65) by hand.

Kafka sends ``TransactionStartTimeMs = -1`` for a transactional id with no transaction
in progress (KIP-664), and kio reads that field as a timezone-aware datetime and
refuses negative values. This reader builds kio's own response entities, with
``transaction_start_time`` None for -1 (no transaction) and a UTC datetime otherwise.
"""

from __future__ import annotations

import datetime
import struct
from typing import Any

from kio.schema.describe_transactions.v0.response import (
    DescribeTransactionsResponse,
    TopicData,
    TransactionState,
)
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i64

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class _Reader:
    def __init__(self, data: bytes | memoryview, pos: int) -> None:
        self.data = memoryview(data)
        self.pos = pos

    def _fixed(self, s: struct.Struct) -> int:
        if self.pos + s.size > len(self.data):
            raise ValueError("truncated DescribeTransactions response")
        (value,) = s.unpack_from(self.data, self.pos)
        self.pos += s.size
        return int(value)

    def i16(self) -> int:
        return self._fixed(_I16)

    def i32(self) -> int:
        return self._fixed(_I32)

    def i64(self) -> int:
        return self._fixed(_I64)

    def uvarint(self) -> int:
        value = shift = 0
        while True:
            if self.pos >= len(self.data) or shift > 28:
                raise ValueError("bad varint in DescribeTransactions response")
            byte = self.data[self.pos]
            self.pos += 1
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
            shift += 7

    def count(self) -> int:
        """A compact array length (a null array reads as empty)."""
        return max(self.uvarint() - 1, 0)

    def string(self) -> str:
        n = self.uvarint() - 1
        if n < 0:
            raise ValueError("null string in DescribeTransactions response")
        if self.pos + n > len(self.data):
            raise ValueError("truncated DescribeTransactions response")
        text = bytes(self.data[self.pos : self.pos + n]).decode()
        self.pos += n
        return text

    def skip_tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()  # tag
            self.pos += self.uvarint()


def _start_time(ms: int) -> datetime.datetime | None:
    if ms < 0:
        return None
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)


def read_describe_transactions_v0(data: bytes | memoryview, pos: int) -> Any:
    """The response entity from ``data[pos:]`` (the body after the response header)."""
    r = _Reader(data, pos)
    throttle_ms = r.i32()
    states = []
    for _ in range(r.count()):
        error_code = r.i16()
        transactional_id = r.string()
        state = r.string()
        timeout_ms = r.i32()
        start_ms = r.i64()
        producer_id = r.i64()
        producer_epoch = r.i16()
        topics = []
        for _ in range(r.count()):
            topic = r.string()
            partitions = tuple(i32(r.i32()) for _ in range(r.count()))
            r.skip_tags()
            topics.append(TopicData(topic=TopicName(topic), partitions=partitions))
        r.skip_tags()
        states.append(
            TransactionState(
                error_code=ErrorCode(error_code),
                transactional_id=transactional_id,  # type: ignore[arg-type]
                transaction_state=state,
                transaction_timeout=datetime.timedelta(milliseconds=timeout_ms),  # type: ignore[arg-type]
                transaction_start_time=_start_time(start_ms),  # type: ignore[arg-type]
                producer_id=i64(producer_id),  # type: ignore[arg-type]
                producer_epoch=i16(producer_epoch),
                topics=tuple(topics),
            )
        )
    r.skip_tags()
    return DescribeTransactionsResponse(
        throttle_time=datetime.timedelta(milliseconds=throttle_ms),  # type: ignore[arg-type]
        transaction_states=tuple(states),
    )
