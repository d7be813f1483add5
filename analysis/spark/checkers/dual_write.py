"""The Spark implementation of rules/dual_write.py (whose docstring is the definition):
the database rows (a small file, in the driver) against the final read's
values of the dual writers, joined per value and grouped per transaction; open prepared
transactions from the final state, with the rule's own function."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ....rundir.dual_write_db import DualWriteDb, read_dual_write_db
from ....rundir.schema import EventType, Isolation
from ...rules import dual_write
from ...rules.dual_write import open_prepared
from .base import CheckOutput, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = dual_write
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.TRANSACTIONS, Reads.FINAL_STATE})
#: a workload value: writer|txn|index
VALUE_FORM = r"^([^|]+)\|([0-9]+)\|([0-9]+)$"
SAMPLE = RULE.SAMPLE

_DB_SCHEMA = T.StructType(
    [
        T.StructField("value", T.StringType(), False),
        T.StructField("writer", T.StringType(), False),
        T.StructField("txn", T.LongType(), False),
    ]
)


def _db_rows(db: DualWriteDb) -> list[tuple[str, str, int]]:
    return [(r["value"], r["writer"], r["txn"]) for d in db["databases"] for r in d["rows"]]


def _missing(side: str, other: str) -> Any:
    return F.slice(
        F.sort_array(F.collect_list(F.when(F.col(side) & ~F.col(other), F.col("value")))),
        1,
        SAMPLE,
    )


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    db = read_dual_write_db(ctx.data.run.path)
    if db is None:
        out.unknown = RULE.NO_DB
        return out
    if not ctx.has_final_read:
        out.unknown = RULE.NO_FINAL_READ
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
    open_prepared(out, tids, pids, ctx.data.final_state)
    return out
