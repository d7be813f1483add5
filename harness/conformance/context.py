"""What a probe works with: one cluster (Apache Kafka's or ours), requests to it, and the
normalisation that makes two clusters' answers comparable with ``==``.

Producer ids are shown relative to the first one the probe saw (``P0``, ``P1``... in order
of first appearance), never as numbers: each cluster allocates its own. Error codes are
Kafka's names. Nothing wall-clock appears in an outcome.

The helpers retry what a Kafka client retries (a coordinator still loading, a previous
transaction's markers still in flight), so an outcome is the settled answer, not a race.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from ...cluster.protocol.error_names import error_name
from ...cluster.protocol.record_batch import (
    CorruptBatch,
    check_length,
    parse_control_record,
    parse_header,
)
from ..clients.batch import Record, encode_batch
from ..launch.base import ClusterHandle
from .wire import Wire, WireError

T = TypeVar("T")

WAIT_S = 30.0
#: errors after which a client asks again (the coordinator is not ready, or busy)
RETRIABLE = frozenset(
    {
        "COORDINATOR_LOAD_IN_PROGRESS",
        "COORDINATOR_NOT_AVAILABLE",
        "NOT_COORDINATOR",
        "CONCURRENT_TRANSACTIONS",
        "NOT_LEADER_OR_FOLLOWER",
        "LEADER_NOT_AVAILABLE",
        "REQUEST_TIMED_OUT",
        "NOT_ENOUGH_REPLICAS",
    }
)

# API keys (Kafka's numbering)
PRODUCE, FETCH, LIST_OFFSETS, METADATA = 0, 1, 2, 3
FIND_COORDINATOR, API_VERSIONS, CREATE_TOPICS, DELETE_RECORDS = 10, 18, 19, 21
INIT_PRODUCER_ID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 22, 24, 25, 26
WRITE_TXN_MARKERS, TXN_OFFSET_COMMIT = 27, 28
DESCRIBE_PRODUCERS, DESCRIBE_TRANSACTIONS, LIST_TRANSACTIONS = 61, 65, 66

READ_UNCOMMITTED, READ_COMMITTED = 0, 1


class ProbeFailed(RuntimeError):
    """A probe could not reach the state it observes (not a difference: a broken probe)."""


class Ids:
    """Producer ids as ``P0``, ``P1``... in order of first appearance; -1 stays -1."""

    def __init__(self) -> None:
        self._seen: dict[int, str] = {}

    def __call__(self, producer_id: Any) -> str | int:
        value = int(producer_id)
        if value < 0:
            return value
        if value not in self._seen:
            self._seen[value] = f"P{len(self._seen)}"
        return self._seen[value]


class Txn:
    """A transactional producer as the probe drives it: id, epoch, next sequence per
    partition (the probe changes these as the protocol says)."""

    def __init__(self, tid: str | None, producer_id: int, epoch: int) -> None:
        self.tid = tid
        self.producer_id = producer_id
        self.epoch = epoch
        self.sequences: dict[tuple[str, int], int] = {}

    def next_sequence(self, topic: str, partition: int, count: int) -> int:
        seq = self.sequences.get((topic, partition), 0)
        self.sequences[(topic, partition)] = seq + count
        return seq

    def new_epoch(self, epoch: int, producer_id: int | None = None) -> None:
        """A bumped epoch (or a new id) restarts every sequence at 0."""
        if producer_id is not None:
            self.producer_id = producer_id
        self.epoch = epoch
        self.sequences.clear()


class ProbeContext:
    """One probe's view of a running cluster of one broker."""

    def __init__(self, handle: ClusterHandle, probe: str, level: int = 2) -> None:
        self.handle = handle
        self.probe = probe
        self.level = level  # the cluster's transaction.version
        self.ids = Ids()
        self._wire: Wire | None = None
        self._names = 0
        self.last_end: Any = None  # the last EndTxn response (its epoch, at v5)

    # ---- connection -----------------------------------------------------------------
    @property
    def wire(self) -> Wire:
        if self._wire is None:
            host, _, port = self.handle.bootstrap.split(",")[0].rpartition(":")
            self._wire = Wire(host, int(port))
        return self._wire

    def send(self, api_key: int, version: int, **fields: Any) -> Any:
        """One request to the broker; a lost connection is reopened once."""
        try:
            return self.wire.send(api_key, version, **fields)
        except WireError:
            self.close()
            return self.wire.send(api_key, version, **fields)

    def close(self) -> None:
        if self._wire is not None:
            self._wire.close()
            self._wire = None

    def restart(self) -> None:
        """Restart every node (the broker, and the controller when it is a node of its
        own) and wait until the broker serves again."""
        self.close()
        for node in self.handle.nodes:
            self.handle.restart(node.id)
        self.wait(lambda: self._serves(), "the restarted broker to serve")

    def _serves(self) -> bool:
        try:
            r = self.send(METADATA, 12, topics=None, allow_auto_topic_creation=False)
        except WireError:
            self.close()
            return False
        return bool(r.brokers)

    # ---- names and normalisation --------------------------------------------------------
    def name(self, kind: str) -> str:
        """A name for this probe's topic or transactional id (the same on both clusters)."""
        self._names += 1
        return f"{self.probe}-{kind}{self._names}"

    def p(self, producer_id: Any) -> str | int:
        return self.ids(producer_id)

    @staticmethod
    def err(code: Any) -> str:
        return error_name(code)

    # ---- waiting -----------------------------------------------------------------------
    @staticmethod
    def wait(condition: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = condition()
            if value:
                return value
            if time.monotonic() > deadline:
                raise ProbeFailed(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(0.1)

    def retry(
        self, call: Callable[[], T], error: Callable[[T], str], what: str, timeout: float = WAIT_S
    ) -> T:
        """``call`` until its error (``error(result)``) is not one a client retries, or
        ``timeout`` seconds have passed (then the last answer)."""
        deadline = time.monotonic() + timeout
        while True:
            result = call()
            if error(result) not in RETRIABLE or time.monotonic() > deadline:
                return result
            time.sleep(0.1)

    # ---- topics ------------------------------------------------------------------------
    def topic(self, partitions: int = 1, configs: Mapping[str, str] | None = None) -> str:
        name = self.name("t")
        r = self.send(
            CREATE_TOPICS,
            7,
            topics=[
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
                }
            ],
            timeout=30000,
            validate_only=False,
        )
        code = self.err(r.topics[0].error_code)
        if code != "NONE":
            raise ProbeFailed(f"CreateTopics {name}: {code} {r.topics[0].error_message}")
        self.wait(lambda: self._leaders(name, partitions), f"leaders of {name}")
        return name

    def _leaders(self, topic: str, partitions: int) -> bool:
        r = self.send(METADATA, 12, topics=[{"name": topic}], allow_auto_topic_creation=False)
        parts = [p for t in r.topics for p in t.partitions if self.err(t.error_code) == "NONE"]
        return len(parts) == partitions and all(int(p.leader_id) >= 0 for p in parts)

    # ---- the transaction coordinator ------------------------------------------------------
    def coordinator_ready(self, tid: str) -> None:
        def find() -> Any:
            return self.send(FIND_COORDINATOR, 4, key_type=1, coordinator_keys=[tid])

        r = self.retry(find, lambda r: self.err(r.coordinators[0].error_code), "a coordinator")
        code = self.err(r.coordinators[0].error_code)
        if code != "NONE":
            raise ProbeFailed(f"FindCoordinator {tid}: {code}")

    def init(
        self,
        tid: str | None = None,
        *,
        timeout_ms: int = 60000,
        producer_id: int = -1,
        epoch: int = -1,
        version: int = 5,
        enable2pc: bool = False,
        keep_prepared: bool = False,
        retry: bool = True,
    ) -> Any:
        """InitProducerId (retried while the coordinator is busy); the raw response."""
        if tid is not None:
            self.coordinator_ready(tid)

        def call() -> Any:
            return self.send(
                INIT_PRODUCER_ID,
                version,
                transactional_id=tid,
                transaction_timeout=timeout_ms,
                producer_id=producer_id,
                producer_epoch=epoch,
                enable2_pc=enable2pc,
                keep_prepared_txn=keep_prepared,
            )

        if not retry:
            return call()
        return self.retry(call, lambda r: self.err(r.error_code), "InitProducerId")

    def txn(self, tid: str | None = None, **kwargs: Any) -> Txn:
        """A producer initialised for ``tid`` (a new name if None): fails unless NONE."""
        tid = tid or self.name("x")
        r = self.init(tid, **kwargs)
        if self.err(r.error_code) != "NONE":
            raise ProbeFailed(f"InitProducerId {tid}: {self.err(r.error_code)}")
        self.p(r.producer_id)  # named in the order the probe made its producers
        return Txn(tid, int(r.producer_id), int(r.producer_epoch))

    def idempotent(self) -> Txn:
        r = self.init(None)
        if self.err(r.error_code) != "NONE":
            raise ProbeFailed(f"InitProducerId (idempotent): {self.err(r.error_code)}")
        return Txn(None, int(r.producer_id), int(r.producer_epoch))

    def add_partitions(
        self, txn: Txn, partitions: Mapping[str, Sequence[int]], *, version: int = 3
    ) -> dict[str, str]:
        """AddPartitionsToTxn (client versions): ``{"topic-p": ERROR}``."""

        def call() -> Any:
            return self.send(
                ADD_PARTITIONS,
                version,
                v3_and_below_transactional_id=txn.tid,
                v3_and_below_producer_id=txn.producer_id,
                v3_and_below_producer_epoch=txn.epoch,
                v3_and_below_topics=[
                    {"name": t, "partitions": list(ps)} for t, ps in partitions.items()
                ],
            )

        def errors(r: Any) -> dict[str, str]:
            return {
                f"{t.name}-{p.partition_index}": self.err(p.partition_error_code)
                for t in r.results_by_topic_v3_and_below
                for p in t.results_by_partition
            }

        r = self.retry(call, lambda r: _worst(errors(r)), "AddPartitionsToTxn")
        return {k.removeprefix(f"{self.probe}-"): v for k, v in errors(r).items()}

    def add_partitions_error(self, txn: Txn, topic: str, partition: int = 0, **kw: Any) -> str:
        return next(iter(self.add_partitions(txn, {topic: [partition]}, **kw).values()))

    def verify(self, txn: Txn, topic: str, partition: int = 0, version: int = 4) -> Any:
        """AddPartitionsToTxn v4+ with verify_only (what a broker sends): the raw response."""
        return self.send(
            ADD_PARTITIONS,
            version,
            transactions=[
                {
                    "transactional_id": txn.tid,
                    "producer_id": txn.producer_id,
                    "producer_epoch": txn.epoch,
                    "verify_only": True,
                    "topics": [{"name": topic, "partitions": [partition]}],
                }
            ],
        )

    def produce(
        self,
        txn: Txn,
        topic: str,
        partition: int = 0,
        *,
        count: int = 1,
        version: int = 12,
        transactional: bool = True,
        sequence: int | None = None,
        epoch: int | None = None,
        tid: str | bool | None = True,
        value_size: int = 0,
    ) -> dict[str, Any]:
        """A Produce of ``count`` records: ``{"error": NAME, "offset": base offset}``.
        ``tid=True`` sends the producer's transactional id (False/None: none)."""
        seq = txn.next_sequence(topic, partition, count) if sequence is None else sequence
        now = int(time.time() * 1000)
        records = [
            Record(None, b"v" * value_size if value_size else f"v{i}".encode(), (), now)
            for i in range(count)
        ]
        batch = encode_batch(
            records,
            producer_id=txn.producer_id,
            producer_epoch=txn.epoch if epoch is None else epoch,
            base_sequence=seq,
            transactional=transactional,
        )
        part = self.retry(
            lambda: (
                self.send(
                    PRODUCE,
                    version,
                    transactional_id=txn.tid if tid is True else (tid or None),
                    acks=-1,
                    timeout=10000,
                    topic_data=[
                        {"name": topic, "partition_data": [{"index": partition, "records": batch}]}
                    ],
                )
                .responses[0]
                .partition_responses[0]
            ),
            lambda part: self.err(part.error_code),
            "Produce",
        )
        error = self.err(part.error_code)
        if error != "NONE" and sequence is None:
            txn.sequences[(topic, partition)] = seq  # not written: the sequence is free again
        return {"error": error, "offset": int(part.base_offset) if error == "NONE" else None}

    def end(
        self,
        txn: Txn,
        commit: bool,
        *,
        version: int = 4,
        adopt: bool = True,
        patience: float = WAIT_S,
    ) -> str:
        """EndTxn (retried while the coordinator is busy): the error name. At v5 the
        returned epoch (KIP-890) becomes the producer's when ``adopt``."""
        r = self.retry(
            lambda: self.send(
                END_TXN,
                version,
                transactional_id=txn.tid,
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
                committed=commit,
            ),
            lambda r: self.err(r.error_code),
            "EndTxn",
            patience,
        )
        error = self.err(r.error_code)
        if version >= 5 and adopt and error == "NONE":
            txn.new_epoch(int(r.producer_epoch), int(r.producer_id))
        self.last_end = r
        return error

    def transaction(
        self, txn: Txn, topic: str, commit: bool, partition: int = 0, **produce: Any
    ) -> dict[str, Any]:
        """One whole transaction the way a client of the cluster's level writes it: at
        transaction.version 2 Produce v12 and EndTxn v5 (a new epoch), below it
        AddPartitionsToTxn, Produce v9 and EndTxn v3; returns once its markers are written
        (EndTxn answers before that), so later writes land after them on both clusters."""
        out: dict[str, Any] = {}
        if self.level >= 2:
            out["produce"] = self.produce(txn, topic, partition, version=12, **produce)["error"]
            out["end"] = self.end(txn, commit, version=5)
        else:
            out["add"] = self.add_partitions_error(txn, topic, partition)
            out["produce"] = self.produce(txn, topic, partition, version=9, **produce)["error"]
            out["end"] = self.end(txn, commit, version=3)
        if out["end"] == "NONE":
            self.stable(topic, partition)  # the markers are written before what follows
        return out

    def add_offsets(self, txn: Txn, group: str, *, version: int = 3) -> str:
        r = self.retry(
            lambda: self.send(
                ADD_OFFSETS,
                version,
                transactional_id=txn.tid,
                producer_id=txn.producer_id,
                producer_epoch=txn.epoch,
                group_id=group,
            ),
            lambda r: self.err(r.error_code),
            "AddOffsetsToTxn",
        )
        return self.err(r.error_code)

    # ---- reading partitions ------------------------------------------------------------
    def fetch(
        self, topic: str, partition: int = 0, offset: int = 0, isolation: int = READ_COMMITTED
    ) -> dict[str, Any]:
        """Fetch v12 from ``offset``: error, offsets, aborted transactions and batches
        (``[offset, "data"|"commit"|"abort", producer, epoch, records]``)."""
        r = self.retry(
            lambda: self._fetch(topic, partition, offset, isolation),
            lambda r: self.err(r.responses[0].partitions[0].error_code),
            "Fetch",
        )
        part = r.responses[0].partitions[0]
        aborted = part.aborted_transactions
        return {
            "error": self.err(part.error_code),
            "high_watermark": int(part.high_watermark),
            "lso": int(part.last_stable_offset),
            "log_start": int(part.log_start_offset),
            "aborted": None
            if aborted is None
            else sorted([self.p(a.producer_id), int(a.first_offset)] for a in aborted),
            "batches": self._batches(bytes(part.records or b"")),
        }

    def _fetch(self, topic: str, partition: int, offset: int, isolation: int) -> Any:
        return self.send(
            FETCH,
            12,
            replica_id=-1,
            max_wait=0,
            min_bytes=0,
            max_bytes=1 << 20,
            isolation_level=isolation,
            session_id=0,
            session_epoch=-1,
            topics=[
                {
                    "topic": topic,
                    "partitions": [
                        {
                            "partition": partition,
                            "current_leader_epoch": -1,
                            "fetch_offset": offset,
                            "last_fetched_epoch": -1,
                            "log_start_offset": -1,
                            "partition_max_bytes": 1 << 20,
                        }
                    ],
                }
            ],
            forgotten_topics_data=[],
            rack_id="",
        )

    def _batches(self, data: bytes) -> list[list[Any]]:
        out: list[list[Any]] = []
        pos = 0
        while pos < len(data):
            try:
                h = parse_header(data, pos)
                check_length(h, pos, len(data))
            except CorruptBatch:
                break  # a partial batch at the end of the response
            if h.is_control:
                commit, _ = parse_control_record(data[pos : pos + h.size])
                kind = "commit" if commit else "abort"
            else:
                kind = "data"
            out.append(
                [h.base_offset, kind, self.p(h.producer_id), h.producer_epoch, h.records_count]
            )
            pos += h.size
        return out

    def offsets(self, topic: str, partition: int = 0) -> dict[str, int]:
        """High watermark and LSO (ListOffsets latest, both isolation levels)."""
        out = {}
        for name, level in (("high_watermark", READ_UNCOMMITTED), ("lso", READ_COMMITTED)):

            def call(level: int = level) -> Any:
                return self.send(
                    LIST_OFFSETS,
                    7,
                    replica_id=-1,
                    isolation_level=level,
                    topics=[
                        {
                            "name": topic,
                            "partitions": [
                                {
                                    "partition_index": partition,
                                    "current_leader_epoch": -1,
                                    "timestamp": -1,
                                }
                            ],
                        }
                    ],
                )

            r = self.retry(
                call, lambda r: self.err(r.topics[0].partitions[0].error_code), "offsets"
            )
            part = r.topics[0].partitions[0]
            if self.err(part.error_code) != "NONE":
                raise ProbeFailed(f"ListOffsets {topic}-{partition}: {self.err(part.error_code)}")
            out[name] = int(part.offset)
        return out

    def stable(self, topic: str, partition: int = 0) -> dict[str, int]:
        """Wait until the LSO reaches the high watermark (markers written); the offsets."""
        return self.wait(
            lambda: (o := self.offsets(topic, partition))["lso"] == o["high_watermark"] and o,
            f"{topic}-{partition} to be stable",
        )

    # ---- KIP-664 --------------------------------------------------------------------
    def producers(self, topic: str, partition: int = 0) -> Any:
        """DescribeProducers: error and each producer (epoch, last sequence, whether it
        has a transaction open and from where), ordered by producer."""
        r = self.retry(
            lambda: self.send(
                DESCRIBE_PRODUCERS, 0, topics=[{"name": topic, "partition_indexes": [partition]}]
            ),
            lambda r: self.err(r.topics[0].partitions[0].error_code),
            "DescribeProducers",
        )
        part = r.topics[0].partitions[0]
        rows = [
            {
                "producer": self.p(a.producer_id),
                "epoch": int(a.producer_epoch),
                "last_sequence": int(a.last_sequence),
                "txn_start_offset": int(a.current_txn_start_offset),
                "coordinator_epoch": int(a.coordinator_epoch),
                "timestamp_set": int(a.last_timestamp) > 0,
            }
            for a in part.active_producers
        ]
        return {"error": self.err(part.error_code), "producers": sorted(rows, key=str)}

    def describe(self, tid: str) -> dict[str, Any]:
        """DescribeTransactions (retried while the coordinator loads): state, producer,
        epoch, timeout, whether a start time is set, partitions."""
        r = self.retry(
            lambda: self.send(DESCRIBE_TRANSACTIONS, 0, transactional_ids=[tid]),
            lambda r: self.err(r.transaction_states[0].error_code),
            "DescribeTransactions",
        )
        s = r.transaction_states[0]
        error = self.err(s.error_code)
        if error != "NONE":
            return {"error": error}
        start = s.transaction_start_time
        return {
            "error": error,
            "state": str(s.transaction_state),
            "producer": self.p(s.producer_id),
            "epoch": int(s.producer_epoch),
            "timeout_ms": int(s.transaction_timeout.total_seconds() * 1000),
            "start_time": "none" if start is None else "set",
            "partitions": sorted(
                f"{t.topic.removeprefix(self.probe + '-')}-{p}"
                for t in s.topics
                for p in t.partitions
            ),
        }

    def state(self, tid: str) -> str:
        return str(self.describe(tid).get("state", "?"))

    def wait_state(self, tid: str, *states: str) -> str:
        return str(self.wait(lambda: (s := self.state(tid)) in states and s, f"{tid} in {states}"))

    def list_txns(
        self,
        states: Sequence[str] = (),
        producers: Sequence[int] = (),
        duration_ms: int = -1,
        version: int = 1,
        mine: bool = True,
    ) -> dict[str, Any]:
        """ListTransactions; ``mine``: only this probe's transactional ids (sorted)."""
        r = self.send(
            LIST_TRANSACTIONS,
            version,
            state_filters=list(states),
            producer_id_filters=list(producers),
            duration_filter=duration_ms,
        )
        rows = [
            [
                t.transactional_id.removeprefix(self.probe + "-"),
                self.p(t.producer_id),
                t.transaction_state,
            ]
            for t in r.transaction_states
            if not mine or t.transactional_id.startswith(self.probe + "-")
        ]
        return {
            "error": self.err(r.error_code),
            "unknown_states": sorted(r.unknown_state_filters),
            "transactions": sorted(rows),
        }

    def write_markers(
        self,
        txn: Txn,
        topic: str,
        partition: int = 0,
        *,
        commit: bool = False,
        coordinator_epoch: int = -1,
        version: int = 1,
    ) -> str:
        """WriteTxnMarkers as an admin's abort (KIP-664: coordinator epoch -1)."""
        r = self.send(
            WRITE_TXN_MARKERS,
            version,
            markers=[
                {
                    "producer_id": txn.producer_id,
                    "producer_epoch": txn.epoch,
                    "transaction_result": commit,
                    "topics": [{"name": topic, "partition_indexes": [partition]}],
                    "coordinator_epoch": coordinator_epoch,
                }
            ],
        )
        return self.err(r.markers[0].topics[0].partitions[0].error_code)

    def delete_records(self, topic: str, partition: int, offset: int) -> dict[str, Any]:
        r = self.send(
            DELETE_RECORDS,
            2,
            topics=[
                {"name": topic, "partitions": [{"partition_index": partition, "offset": offset}]}
            ],
            timeout=30000,
        )
        p = r.topics[0].partitions[0]
        return {"error": self.err(p.error_code), "low_watermark": int(p.low_watermark)}


def _worst(errors: Mapping[str, str]) -> str:
    """The error to judge a multi-partition answer by: a retriable one if any."""
    for e in errors.values():
        if e in RETRIABLE:
            return e
    return next((e for e in errors.values() if e != "NONE"), "NONE")
