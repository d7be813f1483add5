"""Dual write (KIP-939): every dual-write transaction — a dual writer's ``(writer, txn)`` that
prepared (a prepare op) or has rows in the database — is in the database and in Kafka alike:
the set of its values among the committed database rows (dual_write_db.json) equals the set of
its values returned by the final read_committed read (values of the form writer|txn|index, of
a dual writer). database_only: values in the database missing from the final read;
kafka_only: values in the final read missing from the database (one row per transaction and
kind, with the counts and up to three missing values). open_prepared: a transaction still open
in the final state although recovery ran: a coordinator transaction of a dual writer's
transactional id in an active state, or a partition's open transaction whose producer id a
dual writer prepared with. Count: transactions (open_prepared: open entries)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ...rundir.dual_write_db import DualWriteDb, read_dual_write_db
from ...rundir.final_state import FinalState
from ...rundir.schema import EventType, Isolation
from .base import CheckOutput, anomalies, definition, row
from .context import CheckContext
from .protocol import Reads

NAME = "dual_write"
KINDS: tuple[str, ...] = ("database_only", "kafka_only", "open_prepared")
READS = frozenset({Reads.TRANSACTIONS, Reads.FINAL_STATE})
#: coordinator states of a transaction that is not finished
ACTIVE_STATES = ("Ongoing", "Prepared", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")
#: a workload value: writer|txn|index
VALUE_FORM = r"^([^|]+)\|([0-9]+)\|([0-9]+)$"
NO_DB = "no database contents (dual_write_db.json): the run has no dual writers"
NO_FINAL_READ = "no final read: the database cannot be compared with Kafka"
SAMPLE = 3

_DB_SCHEMA = T.StructType(
    [
        T.StructField("value", T.StringType(), False),
        T.StructField("writer", T.StringType(), False),
        T.StructField("txn", T.LongType(), False),
    ]
)


def open_prepared_rows(
    fs: FinalState | None, tids: set[str], pids: set[int]
) -> tuple[list[dict[str, Any]], str | None]:
    """The final state's entries of dual writers' transactions still open, and a note when the
    final state cannot show them."""
    if fs is None:
        return [], "no final state: open prepared transactions are not checked"
    captured = fs.get("captured_ns")
    out = []
    for c in fs.get("coordinator_transactions") or []:
        if c.get("transactional_id") in tids and c.get("state") in ACTIVE_STATES:
            out.append(row(NAME, "open_prepared", captured, {"coordinator": c}))
    for o in fs.get("open_transactions") or []:
        if o.get("producer_id") in pids:
            out.append(row(NAME, "open_prepared", captured, {"partition_state": o}))
    note = None
    if fs.get("coordinator_transactions") is None:
        note = "the final state has no coordinator transactions: only partitions are checked"
    return out, note


def _db_rows(db: DualWriteDb) -> list[tuple[str, str, int]]:
    return [(r["value"], r["writer"], r["txn"]) for d in db["databases"] for r in d["rows"]]


def _missing(side: str, other: str) -> Any:
    return F.slice(
        F.sort_array(F.collect_list(F.when(F.col(side) & ~F.col(other), F.col("value")))),
        1,
        SAMPLE,
    )


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), KINDS)
    db = read_dual_write_db(ctx.data.run.path)
    if db is None:
        out.unknown = NO_DB
        return out
    if not ctx.has_final_read:
        out.unknown = NO_FINAL_READ
        return out
    spark = ctx.data.history.sparkSession
    h = ctx.data.history
    prep = h.filter(F.col("type") == EventType.PREPARE.value).select(
        F.col("process").alias("writer"),
        "txn",
        "invoke_ns",
        "transactional_id",
        "producer_id",
    )
    facts = prep.select("writer", "transactional_id", "producer_id").distinct().collect()
    db_rows = _db_rows(db)
    writers = sorted({r["writer"] for r in facts} | {w for _v, w, _t in db_rows})
    tids = {r["transactional_id"] for r in facts if r["transactional_id"] is not None}
    pids = {r["producer_id"] for r in facts if r["producer_id"] is not None}

    in_db = spark.createDataFrame(db_rows, _DB_SCHEMA).select(
        "value",
        F.col("writer").alias("d_writer"),
        F.col("txn").alias("d_txn"),
        F.lit(True).alias("in_db"),
    )
    read = h.filter(
        (F.col("type") == EventType.FINAL_READ.value)
        & (F.col("isolation").isNull() | (F.col("isolation") == Isolation.READ_COMMITTED.value))
        & F.col("value").rlike(VALUE_FORM)
    ).select("value")
    k_writer = F.regexp_extract("value", VALUE_FORM, 1)
    in_kafka = (
        read.select(
            "value",
            k_writer.alias("k_writer"),
            F.regexp_extract("value", VALUE_FORM, 2).cast("long").alias("k_txn"),
        )
        .filter(k_writer.isin(writers))
        .distinct()
        .withColumn("in_kafka", F.lit(True))
    )
    both = in_db.join(in_kafka, "value", "full_outer").select(
        "value",
        F.coalesce("d_writer", "k_writer").alias("writer"),
        F.coalesce("d_txn", "k_txn").alias("txn"),
        F.coalesce("in_db", F.lit(False)).alias("in_db"),
        F.coalesce("in_kafka", F.lit(False)).alias("in_kafka"),
    )
    per_txn = both.groupBy("writer", "txn").agg(
        F.sum(F.col("in_db").cast("int")).alias("database_rows"),
        F.sum(F.col("in_kafka").cast("int")).alias("final_read_records"),
        F.sum((F.col("in_db") & ~F.col("in_kafka")).cast("int")).alias("n_db_only"),
        F.sum((F.col("in_kafka") & ~F.col("in_db")).cast("int")).alias("n_kafka_only"),
        _missing("in_db", "in_kafka").alias("missing_from_final_read"),
        _missing("in_kafka", "in_db").alias("missing_from_database"),
    )
    prepared = prep.groupBy("writer", "txn").agg(F.min("invoke_ns").alias("prepare_ns"))
    txns: DataFrame = per_txn.join(prepared, ["writer", "txn"], "full_outer")
    out.checked["transactions"] = txns.count()
    transaction = F.struct(F.col("writer"), F.col("txn"))
    counts = {
        "database_rows": F.coalesce("database_rows", F.lit(0)),
        "final_read_records": F.coalesce("final_read_records", F.lit(0)),
    }
    out.frames.append(
        anomalies(
            txns.filter(F.col("n_db_only") > 0),
            NAME,
            "database_only",
            F.col("prepare_ns"),
            {
                "transaction": transaction,
                **counts,
                "missing_from_final_read": F.col("missing_from_final_read"),
            },
        )
    )
    out.frames.append(
        anomalies(
            txns.filter(F.col("n_kafka_only") > 0),
            NAME,
            "kafka_only",
            F.col("prepare_ns"),
            {
                "transaction": transaction,
                **counts,
                "missing_from_database": F.col("missing_from_database"),
            },
        )
    )
    rows, note = open_prepared_rows(ctx.data.final_state, tids, pids)
    out.rows.extend(rows)
    if note:
        out.notes.append(note)
    return out
