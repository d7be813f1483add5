"""How transaction state is written to (and read back from) the state log of one
``__transaction_state`` partition.

Keys and values are compact JSON (inspectable with ``jq`` after a run):

- ``["txn", transactional_id]`` -> the id's metadata after its last change
  (:meth:`TxnTransit.to_json`); a tombstone when the id expired. Values are versioned
  as Kafka's TransactionLogValue: version 0 (no ``"v"``) as before KIP-890, version 1
  (``"v":1``) adds the client's transaction version and NextProducerId
  (:func:`value_version` picks one); every version stays readable.
- ``["epoch"]`` -> ``{"coordinator_epoch": n}``: bumped and written every time the
  partition is loaded, before anything is served, so the markers of an older
  incarnation carry a smaller coordinator epoch and brokers fence them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...storage.state_log import Record, StateLog, scan
from .metadata import VALUE_VERSION, VALUE_VERSIONS, TxnTransit

EPOCH_KEY = b'["epoch"]'


_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False)
_KEYS: dict[str, bytes] = {}


def _dumps(value: Any) -> bytes:
    return _ENCODER.encode(value).encode()


def txn_key(transactional_id: str) -> bytes:
    key = _KEYS.get(transactional_id)
    if key is None:
        key = _dumps(["txn", transactional_id])
        if len(_KEYS) >= 100_000:
            _KEYS.clear()  # a cache: bound it
        _KEYS[transactional_id] = key
    return key


def value_version(transit: TxnTransit, transaction_version: int | None) -> int:
    """The value version to write: 1 once the finalized transaction.version is >= 1
    (Kafka's ``transactionLogValueVersion``), and always when version 0 would drop
    the record's KIP-890 fields (a TV2 client on a cluster whose level is unknown)."""
    if (transaction_version is not None and transaction_version >= 1) or transit.needs_value_v1:
        return 1
    return 0


def txn_record(
    transactional_id: str, transit: TxnTransit, transaction_version: int | None = None
) -> Record:
    return Record(
        txn_key(transactional_id),
        encode_transit(transit, value_version(transit, transaction_version)),
    )


_json_str = json.encoder.encode_basestring  # the C encoder, as ensure_ascii=False uses


_PARTITIONS: dict[frozenset[tuple[str, int]], str] = {}


def _partitions_json(partitions: frozenset[tuple[str, int]]) -> str:
    """The JSON of a partition set (without the brackets); a producer adds the same
    partitions transaction after transaction, so the encodings are cached."""
    cached = _PARTITIONS.get(partitions)
    if cached is None:
        cached = ",".join(f"[{_json_str(topic)},{int(p)}]" for topic, p in sorted(partitions))
        if len(_PARTITIONS) >= 4096:
            _PARTITIONS.clear()  # a cache: bound it
        _PARTITIONS[partitions] = cached
    return cached


def encode_transit(t: TxnTransit, version: int = VALUE_VERSION) -> bytes:
    """``_dumps(t.to_json(version))``, written directly (three of these per
    transaction; the generic encoder costs several times more). The unit tests hold
    them equal."""
    if version not in VALUE_VERSIONS:
        raise ValueError(f"unknown transaction log value version {version}")
    partitions = _partitions_json(t.partitions) if t.partitions else ""
    v1 = version >= 1
    return (
        f'{{{_V1_HEAD if v1 else ""}"state":{_json_str(t.state.value)},'
        f'"pid":{int(t.producer_id)},'
        f'"last_pid":{int(t.last_producer_id)},"epoch":{int(t.producer_epoch)},'
        f'"last_epoch":{int(t.last_producer_epoch)},"timeout_ms":{int(t.txn_timeout_ms)},'
        f'"partitions":[{partitions}],"start_ms":{int(t.txn_start_ms)},'
        f'"update_ms":{int(t.txn_last_update_ms)},'
        + (
            f'"tv":{int(t.client_transaction_version)},"next_pid":{int(t.next_producer_id)},'
            if v1
            else ""
        )
        + f'"next_epoch":{int(t.next_producer_epoch)},'
        f'"two_pc":{"true" if t.two_phase_commit else "false"}}}'
    ).encode()


_V1_HEAD = '"v":1,'


def tombstone(transactional_id: str) -> Record:
    return Record(txn_key(transactional_id), None)


def epoch_record(coordinator_epoch: int) -> Record:
    return Record(EPOCH_KEY, _dumps({"coordinator_epoch": coordinator_epoch}))


@dataclass(slots=True)
class LoadedPartition:
    coordinator_epoch: int = -1
    """The epoch of the previous incarnation (-1: never loaded)."""
    transactions: dict[str, TxnTransit] = field(default_factory=dict)


def decode(state: dict[bytes, bytes]) -> LoadedPartition:
    loaded = LoadedPartition()
    for raw_key, raw_value in state.items():
        if raw_key == EPOCH_KEY:
            loaded.coordinator_epoch = int(json.loads(raw_value)["coordinator_epoch"])
            continue
        key = json.loads(raw_key)
        if key[0] == "txn":
            loaded.transactions[key[1]] = TxnTransit.from_json(json.loads(raw_value))
    return loaded


def replay(log: StateLog) -> LoadedPartition:
    """Replay (and repair) an open log."""
    return decode(log.load())


def read_partition(path: Path) -> LoadedPartition:
    """Read a partition's log without repairing or opening it for append (tests, dumps)."""
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        return LoadedPartition()
    records, _ = scan(data)
    state: dict[bytes, bytes] = {}
    for record in records:
        if record.value is None:
            state.pop(record.key, None)
        else:
            state[record.key] = record.value
    return decode(state)


def live_records(
    coordinator_epoch: int,
    transactions: dict[str, TxnTransit],
    transaction_version: int | None = None,
) -> list[Record]:
    """Everything a compacted log must contain to replay to the current state."""
    records = [epoch_record(coordinator_epoch)]
    records.extend(txn_record(tid, t, transaction_version) for tid, t in transactions.items())
    return records


def log_path(data_dir: Path, partition: int) -> Path:
    return Path(data_dir) / f"__transaction_state-{partition}.log"


def open_log(data_dir: Path, partition: int, *, fsync: bool, compact_min_bytes: int) -> StateLog:
    return StateLog(log_path(data_dir, partition), fsync=fsync, compact_min_bytes=compact_min_bytes)
