"""Hand-written AddPartitionsToTxn v4-v5 encoders (KIP-890's batched, server-only form).

A broker sends one of these requests per transaction's first write to a partition
(verification of old clients, the implicit add of new ones) and the coordinator
answers it, so kio's generic encoders (~70 µs each way) were most of the cost of a
verification. Same bytes as kio (the unit tests compare them for every version).
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

from .hot_codecs import array_length, string

VERSIONS = range(4, 6)

_TXN_HEAD = struct.Struct(">qhb").pack  # producer id, epoch, verify only
_RESPONSE_HEAD = struct.Struct(">ih").pack  # throttle time, error code
_PARTITION = struct.Struct(">ihb").pack  # index, error code, no tags
_I32 = struct.Struct(">i").pack
_NO_TAGS = b"\x00"


def add_partitions_to_txn_request(request: Any) -> bytes:
    """AddPartitionsToTxnRequest v4-v5 body from the kio request entity."""
    out = [array_length(len(request.transactions), True)]
    append = out.append
    for txn in request.transactions:
        append(string(txn.transactional_id, True))
        append(_TXN_HEAD(txn.producer_id, txn.producer_epoch, 1 if txn.verify_only else 0))
        append(array_length(len(txn.topics), True))
        for topic in txn.topics:
            append(string(topic.name, True))
            append(array_length(len(topic.partitions), True))
            append(b"".join(_I32(p) for p in topic.partitions))
            append(_NO_TAGS)
        append(_NO_TAGS)
    append(_NO_TAGS)
    return b"".join(out)


TransactionResult = tuple[str, Sequence[tuple[str, Sequence[tuple[int, int]]]]]
"""(transactional id, [(topic, [(partition, error code)])])."""


def add_partitions_to_txn_response(
    error_code: int, results: Sequence[TransactionResult], throttle_time_ms: int = 0
) -> bytes:
    """AddPartitionsToTxnResponse v4-v5 body (the same shape in both versions)."""
    out = [_RESPONSE_HEAD(throttle_time_ms, error_code), array_length(len(results), True)]
    append = out.append
    for txn_id, topics in results:
        append(string(txn_id, True))
        append(array_length(len(topics), True))
        for name, partitions in topics:
            append(string(name, True))
            append(array_length(len(partitions), True))
            append(b"".join(_PARTITION(p, e, 0) for p, e in partitions))
            append(_NO_TAGS)
        append(_NO_TAGS)
    append(_NO_TAGS)
    return b"".join(out)
