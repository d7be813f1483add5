"""The schema of ``final_state.json``: the cluster's state after heal and quiescence.

Typed as the JSON it is (``TypedDict``s, optional keys ``NotRequired``), because the
checkers quote its entries verbatim as evidence: a key absent from the file stays absent.
``parse_final_state`` is the one validation both the analysis and the tests rely on (a bad
file fails with a :class:`RunDirError` naming the field); ``write_final_state`` is the one
writer (``harness/capture/final_state.py``, synthetic runs).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, NotRequired, TypedDict, cast

from .errors import RunDirError


class FinalPartition(TypedDict):
    """One partition's end offsets (from the final read_committed read)."""

    topic: str
    partition: int
    lso: int
    high_watermark: int
    log_start_offset: int
    leader: NotRequired[str | None]
    replicas: NotRequired[list[str]]


class OpenTransaction(TypedDict, total=False):
    """A producer with an open transaction on a partition (DescribeProducers). The harness
    writes every key but ``start_ns``; readers take each with ``.get`` (any may be absent)."""

    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    first_offset: int
    start_ns: int | None
    last_ns: int | None


class TxnPartition(TypedDict):
    topic: str
    partition: int


class CoordinatorTransaction(TypedDict, total=False):
    """An unfinished transaction as its coordinator sees it (DescribeTransactions); as
    with :class:`OpenTransaction`, readers take each key with ``.get``."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    state: str
    timeout_ms: int
    start_ns: int | None
    partitions: list[TxnPartition]


class GroupOffset(TypedDict):
    """A consumer group's committed offset for one partition (OffsetFetch)."""

    group_id: str
    topic: str
    partition: int
    offset: int


class FinalState(TypedDict):
    captured_ns: NotRequired[int | None]
    partitions: list[FinalPartition]
    open_transactions: NotRequired[list[OpenTransaction]]
    coordinator_transactions: NotRequired[list[CoordinatorTransaction] | None]
    """None or absent: the cluster exposes no coordinator state (checks needing it say so)."""
    group_offsets: NotRequired[list[GroupOffset] | None]
    """Every group's committed offsets; None or absent: not captured (checks say so)."""


# The fields the checkers read in each entry, and their JSON types (each may be null).
_PARTITION_REQUIRED = ("topic", "partition", "lso", "high_watermark", "log_start_offset")
_PARTITION_TYPES: dict[str, type] = {
    "topic": str,
    "partition": int,
    "lso": int,
    "high_watermark": int,
    "log_start_offset": int,
}
_OPEN_TXN_TYPES: dict[str, type] = {
    "topic": str,
    "partition": int,
    "producer_id": int,
    "start_ns": int,
}
_COORDINATOR_TXN_TYPES: dict[str, type] = {"state": str, "producer_id": int, "start_ns": int}
_GROUP_OFFSET_TYPES: dict[str, type] = {
    "group_id": str,
    "topic": str,
    "partition": int,
    "offset": int,
}


def check_types(obj: dict[str, Any], types: dict[str, type], where: str) -> None:
    """Each field of ``types`` in ``obj`` is absent, null or of its JSON type (a bool is no
    integer here, though Python says so)."""
    for key, kind in types.items():
        value = obj.get(key)
        if value is None:
            continue
        if isinstance(value, bool) != (kind is bool) or not isinstance(value, kind):
            want = {bool: "true or false", int: "an integer", str: "a string"}[kind]
            shown = json.dumps(value)
            shown = shown if len(shown) <= 40 else shown[:37] + "..."
            raise RunDirError(f"{where}: field {key!r} should be {want}, got {shown}")


def parse_final_state(state: Any, path: Path) -> FinalState:
    """``state`` (parsed JSON) as a :class:`FinalState`, or a RunDirError naming the field."""
    if not isinstance(state, dict):
        raise RunDirError(f"final state ({path}) must be a JSON object")
    parts = state.get("partitions")
    if not isinstance(parts, list):
        raise RunDirError(f"final state ({path}) has no 'partitions' list")
    check_types(state, {"captured_ns": int}, f"final state ({path})")
    for i, p in enumerate(parts):
        missing = [k for k in _PARTITION_REQUIRED if not isinstance(p, dict) or p.get(k) is None]
        if missing:
            raise RunDirError(f"final state ({path}): partitions[{i}] lacks {', '.join(missing)}")
        check_types(p, _PARTITION_TYPES, f"final state ({path}): partitions[{i}]")
    if not isinstance(state.get("open_transactions", []), list):
        raise RunDirError(f"final state ({path}): 'open_transactions' must be a list")
    for key in ("coordinator_transactions", "group_offsets"):
        value = state.get(key)
        if value is not None and not isinstance(value, list):
            raise RunDirError(f"final state ({path}): {key!r} must be a list or null")
    for key, types in (
        ("open_transactions", _OPEN_TXN_TYPES),
        ("coordinator_transactions", _COORDINATOR_TXN_TYPES),
        ("group_offsets", _GROUP_OFFSET_TYPES),
    ):
        for i, entry in enumerate(state.get(key) or ()):
            if not isinstance(entry, dict):
                raise RunDirError(f"final state ({path}): {key}[{i}] must be a JSON object")
            check_types(entry, types, f"final state ({path}): {key}[{i}]")
    return cast(FinalState, state)


def write_final_state(path: str | os.PathLike[str], state: FinalState) -> None:
    """Write ``state`` atomically (temp file + rename)."""
    p = Path(path)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(state, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, p)
