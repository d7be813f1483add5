"""What OffsetCommit and TxnOffsetCommit requests and responses share: the offsets of a
request as flat entries, and the per-partition error codes of a response, in the request's
topic and partition order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: (topic, partition, offset, leader epoch, metadata)
OffsetEntry = tuple[str, int, int, int, str | None]


def commit_entries(topics: Iterable[Any]) -> list[OffsetEntry]:
    """The offsets of a request's ``topics`` (leader epoch -1 where the version has none)."""
    return [
        (
            t.name,
            p.partition_index,
            p.committed_offset,
            getattr(p, "committed_leader_epoch", -1),
            p.committed_metadata,
        )
        for t in topics
        for p in t.partitions
    ]


def partition_errors(topics: Iterable[Any], errors: Mapping[tuple[str, int], int]) -> list[Any]:
    """A response's ``topics``: each requested partition with its error code."""
    return [
        {
            "name": t.name,
            "partitions": [
                {
                    "partition_index": p.partition_index,
                    "error_code": errors[(t.name, p.partition_index)],
                }
                for p in t.partitions
            ],
        }
        for t in topics
    ]
