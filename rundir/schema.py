"""The history schema: the contract between the harness (records) and the analysis (judges).

One definition (``OP_FIELDS`` + ``ITEM_FIELDS``) produces every physical form:

* **JSON Lines** (``history/<process>.jsonl``), written append-only during the run, one line per
  operation *invocation* and one per *completion*.  A line is an object with the op fields below
  plus ``items``: a list of item objects.  Invocation lines carry ``outcome: null``; the completion
  line of the same ``(process, op_id)`` repeats the op fields and adds the outcome, completion time
  and result items.  An invocation without a completion (the process crashed, or the harness was
  interrupted) compacts to ``outcome = "info"`` with ``complete_ns = null``: its effect is unknown.
  A writer killed mid-write leaves a torn last line; a writer resuming the file after it ends
  the fragment and adds the line ``{"torn_line_above": true}``.  Torn lines are skipped with a
  note, any other bad line fails the compaction (``jsonl.py``).
* **Parquet** (``history.parquet``), the compacted, *flat* form the analysis reads: one row per
  item, the op fields repeated on each of its items (``item`` = index within the op); an op with no
  items is one row with null item fields.  Parquet's dictionary/RLE encoding makes the repetition
  nearly free, and every check becomes a filter or a join instead of an ``explode``.
* ``pyarrow`` schemas (:data:`OP_ARROW_SCHEMA`, :data:`HISTORY_ARROW_SCHEMA`) and the Spark schema
  (:func:`history_spark_schema`) are all derived from the field list.

Times are wall-clock nanoseconds since the Unix epoch (``time.time_ns()``), taken on the machine
running the workload (one clock for every process of a run).

Identity rules the analysis relies on:

* ``(process, op_id)`` identifies an operation; ``op_id`` increases strictly in invocation order
  within a process, so it orders a process's operations exactly.
* ``(process, txn)`` identifies a transaction: ``txn`` is a writer-local transaction number that
  is never reused by that process name (a restarted writer keeps counting or takes a new name).
* Written values are unique across the run and self-describing: :func:`encode_value` gives
  ``"<writer>|<txn>|<index>"`` (``txn`` is ``-`` for non-transactional producers).  The analysis
  maps a value read back to its transaction by parsing it, so a write whose ``send`` line was lost
  in a crash can still be attributed.

What each event type means, and what its ``items`` hold (``topic``/``partition``/``offset``/
``value``/``key``/``source``), is documented on :class:`EventType`.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:  # pyspark is heavy; the harness imports this module without Spark.
    from pyspark.sql.types import StructType

SCHEMA_VERSION = 1


class EventType(enum.StrEnum):
    """Kinds of operation recorded in a history, with the meaning of their ``items``."""

    #: init_transactions / InitProducerId. Result: producer_id, producer_epoch. No items.
    INIT = "init"
    #: begin_transaction (client-local in Kafka). ``txn`` is the new transaction number. No items.
    BEGIN = "begin"
    #: Produce one record (transactional when ``txn`` is set, else idempotent/plain).
    #: One item: topic, partition, value, key, ``source`` (the input value for a
    #: consume-transform-produce copier), and ``offset`` from the ack (null if unknown).
    SEND = "send"
    #: send_offsets_to_transaction. ``group_id`` set; items: topic, partition, offset = the
    #: next offset to consume (the committed position), value null.
    SEND_OFFSETS = "send_offsets"
    #: KIP-939 prepare_transaction for ``txn`` (a dual writer, before its database commit):
    #: every record is flushed and only commit or abort may follow. Result: producer_id,
    #: producer_epoch = the prepared transaction state it returned. No items.
    PREPARE = "prepare"
    #: commit_transaction for ``txn``. ``outcome`` info = unknown whether it committed. No items.
    #: A dual writer's recovery (KIP-939 complete_transaction) records the commit or abort it
    #: decided in the history of the writer whose transaction it completed.
    COMMIT = "commit"
    #: abort_transaction for ``txn``. No items.
    ABORT = "abort"
    #: Consumer poll. ``isolation`` read_committed / read_uncommitted; items: the records
    #: returned, in the order the client returned them.
    POLL = "poll"
    #: Partitions assigned (assign() or a rebalance). Items: topic, partition, offset = the
    #: starting position when known. A *rewind point*: consumption may restart from there.
    ASSIGN = "assign"
    #: Partitions revoked. Items: topic, partition. A rewind point.
    REVOKE = "revoke"
    #: Explicit seek. Items: topic, partition, offset = new position. A rewind point.
    SEEK = "seek"
    #: Consumer (non-transactional) offset commit. ``group_id``; items: topic, partition, offset.
    COMMIT_OFFSETS = "commit_offsets"
    #: Process (re)started: a rewind point for every partition of that process. No items.
    START = "start"
    #: Process stopped or crashed (``outcome`` info when it crashed). No items.
    STOP = "stop"
    #: The final phase's read_committed read of every partition from the start, after faults
    #: are healed and the cluster is quiescent. Items: the records returned, in order.
    FINAL_READ = "final_read"
    #: A request a correct cluster must refuse, sent on purpose by a hostile client
    #: (``harness/workload/probes.py``): ``outcome`` ok = the cluster accepted it, fail =
    #: refused (``error`` names the code), info = no answer; ``producer_id``/``producer_epoch``
    #: what it carried. One item: ``key`` = the probe kind, ``source`` = the error Apache
    #: Kafka answers, and, for a write, topic, partition and the ``value`` no read may return.
    PROBE = "probe"


#: Rewind points: after one of these a consumer may legitimately see offsets again.
REWIND_TYPES: tuple[str, ...] = (
    EventType.ASSIGN.value,
    EventType.REVOKE.value,
    EventType.SEEK.value,
    EventType.START.value,
)


class Outcome(enum.StrEnum):
    """Completion outcome of an operation (Jepsen's convention)."""

    OK = "ok"  #: it happened
    FAIL = "fail"  #: it definitely did not happen
    INFO = "info"  #: unknown (timeout, crash, connection lost)


class Isolation(enum.StrEnum):
    READ_COMMITTED = "read_committed"
    READ_UNCOMMITTED = "read_uncommitted"


@dataclass(frozen=True)
class Field:
    name: str
    type: pa.DataType
    doc: str
    nullable: bool = True


OP_FIELDS: tuple[Field, ...] = (
    Field("process", pa.string(), "Recording process (worker) name; never contains '|'.", False),
    Field(
        "op_id", pa.int64(), "Process-local op sequence number, increasing in invoke order.", False
    ),
    Field("type", pa.string(), "EventType value.", False),
    Field("outcome", pa.string(), "Outcome value: ok, fail or info (null on invocation lines)."),
    Field("invoke_ns", pa.int64(), "Invocation wall-clock time, ns since the epoch.", False),
    Field("complete_ns", pa.int64(), "Completion time, ns; null when the op never completed."),
    Field("error", pa.string(), "Error name or code when the op failed or is unknown."),
    Field("transactional_id", pa.string(), "transactional.id of a transactional producer."),
    Field("producer_id", pa.int64(), "Producer id, where known."),
    Field("producer_epoch", pa.int32(), "Producer epoch, where known."),
    Field(
        "txn", pa.int64(), "Writer-local transaction number (begin/send/send_offsets/commit/abort)."
    ),
    Field("group_id", pa.string(), "Consumer group (consumers, copiers, send_offsets)."),
    Field("isolation", pa.string(), "Isolation level of a poll; read_committed when null."),
)

ITEM_FIELDS: tuple[Field, ...] = (
    Field("topic", pa.string(), "Topic."),
    Field("partition", pa.int32(), "Partition."),
    Field(
        "offset", pa.int64(), "Offset (record offset, acked offset, or position; see EventType)."
    ),
    Field("value", pa.string(), "Record value (encode_value for workload writes)."),
    Field("key", pa.string(), "Record key."),
    Field(
        "source", pa.string(), "For a copier's send: the input record value it was derived from."
    ),
)

#: Flat-form column holding the item's index within its op (null for an op without items).
ITEM_INDEX = Field("item", pa.int32(), "Index of the item within its op; null if the op has none.")


def _arrow_field(f: Field) -> pa.Field:
    return pa.field(f.name, f.type, nullable=f.nullable)


ITEM_ARROW_TYPE = pa.struct([_arrow_field(f) for f in ITEM_FIELDS])

#: One JSON Lines line (nested form).
OP_ARROW_SCHEMA = pa.schema(
    [
        *(pa.field(f.name, f.type, nullable=True) for f in OP_FIELDS),
        pa.field("items", pa.list_(ITEM_ARROW_TYPE)),
    ]
)

#: history.parquet (flat form).
HISTORY_ARROW_SCHEMA = pa.schema(
    [
        *(_arrow_field(f) for f in OP_FIELDS),
        _arrow_field(ITEM_INDEX),
        *(_arrow_field(f) for f in ITEM_FIELDS),
    ],
    metadata={b"txnchaos.schema_version": str(SCHEMA_VERSION).encode()},
)

HISTORY_COLUMNS: tuple[str, ...] = tuple(HISTORY_ARROW_SCHEMA.names)

# -- other run-directory tables -------------------------------------------------------------

FAULT_FIELDS: tuple[Field, ...] = (
    Field("start_ns", pa.int64(), "Fault start time.", False),
    Field("end_ns", pa.int64(), "Fault end (healed) time; null if never healed."),
    Field("target", pa.string(), "What the fault hit (node name, link, process)."),
    Field("kind", pa.string(), "Fault kind: kill, pause, partition, delay, clock, ..."),
    Field("detail", pa.string(), "Free-form detail."),
)
FAULT_ARROW_SCHEMA = pa.schema([_arrow_field(f) for f in FAULT_FIELDS])

METRIC_FIELDS: tuple[Field, ...] = (
    Field("time_ns", pa.int64(), "Scrape time.", False),
    Field("node", pa.string(), "Node scraped (or 'harness' for harness-sampled series).", False),
    Field("name", pa.string(), "Metric name (see METRIC_NAMES).", False),
    Field("topic", pa.string(), "Label topic, when the series has one."),
    Field("partition", pa.int32(), "Label partition, when the series has one."),
    Field("labels", pa.string(), "All labels as a compact JSON object."),
    Field("value", pa.float64(), "Sample value.", False),
)
METRIC_ARROW_SCHEMA = pa.schema([_arrow_field(f) for f in METRIC_FIELDS])


class MetricName(enum.StrEnum):
    """Canonical metric names the analysis understands.

    Nodes may expose JMX-style names (``kafka.server:type=ReplicaManager,name=X``) or Prometheus
    forms; :func:`canonical_metric_name` maps any spelling whose last name component matches.
    """

    PARTITIONS_WITH_LATE_TXNS = "PartitionsWithLateTransactionsCount"  # per broker
    LAST_STABLE_OFFSET_LAG = "LastStableOffsetLag"  # per partition (topic, partition labels)
    PRODUCER_ID_COUNT = "ProducerIdCount"  # per broker
    TXNS_COMMITTED = "TransactionsCommitted"  # coordinator counter (monotonic, resets on restart)
    TXNS_ABORTED = "TransactionsAborted"  # coordinator counter (includes timeout aborts)
    #: Harness-sampled (node "harness") per-partition LSO and high watermark, via ListOffsets
    #: with read_committed / read_uncommitted, about once a second.
    HARNESS_LSO = "txnchaos.lso"
    HARNESS_HIGH_WATERMARK = "txnchaos.high_watermark"


def canonical_metric_name(raw: str) -> str:
    """Map a scraped metric name onto a :class:`MetricName` value, or return it unchanged."""
    low = raw.lower()
    for m in MetricName:
        if low == m.value.lower():
            return m.value
    squashed = "".join(ch for ch in low if ch.isalnum())
    for m in MetricName:
        key = "".join(ch for ch in m.value.lower() if ch.isalnum())
        if m.value.startswith("txnchaos."):
            continue
        for suffix in ("", "total", "value", "count"):
            if squashed.endswith(key + suffix) and (suffix != "count" or key.endswith("count")):
                return m.value
    return raw


# -- value encoding -------------------------------------------------------------------------


def encode_value(writer: str, txn: int | None, index: int) -> str:
    """A unique, self-describing record value: ``writer|txn|index`` (txn ``-`` if none)."""
    if "|" in writer:
        raise ValueError(f"writer name must not contain '|': {writer!r}")
    return f"{writer}|{'-' if txn is None else txn}|{index}"


def decode_value(value: str) -> tuple[str, int | None, int] | None:
    """Inverse of :func:`encode_value`; ``None`` for values not in that form."""
    parts = value.split("|")
    if len(parts) != 3:
        return None
    writer, txn, index = parts
    try:
        return writer, None if txn == "-" else int(txn), int(index)
    except ValueError:
        return None


# -- Spark schemas (imported lazily) ---------------------------------------------------------


def _spark_type(t: pa.DataType) -> Any:
    from pyspark.sql import types as T

    if pa.types.is_string(t):
        return T.StringType()
    if pa.types.is_int64(t):
        return T.LongType()
    if pa.types.is_int32(t):
        return T.IntegerType()
    if pa.types.is_float64(t):
        return T.DoubleType()
    if pa.types.is_boolean(t):
        return T.BooleanType()
    raise TypeError(f"no Spark type for {t}")


def spark_schema(schema: pa.Schema) -> StructType:
    """The Spark StructType equivalent of a flat pyarrow schema."""
    from pyspark.sql import types as T

    return T.StructType(
        [T.StructField(f.name, _spark_type(f.type), nullable=f.nullable) for f in schema]
    )


def history_spark_schema() -> StructType:
    return spark_schema(HISTORY_ARROW_SCHEMA)


def metrics_spark_schema() -> StructType:
    return spark_schema(METRIC_ARROW_SCHEMA)


def faults_spark_schema() -> StructType:
    return spark_schema(FAULT_ARROW_SCHEMA)
