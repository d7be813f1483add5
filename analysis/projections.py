"""Shared projections of a history, computed once per analysis and used by several checkers.

* ``txns``    — one row per transaction ``(writer, txn)``: its fate (``status``) and the times of
  its end operations.  Small; joined by broadcast.
* ``located`` — every observation of a value at a place: reads by read_committed consumers
  (role ``r``; poll and final_read) and producer acks (role ``w``), each with the value's
  transaction parsed from the self-describing value and that transaction's status.
* ``values``  — ``located`` grouped by value: was it written, read, finally read, where, when
  first read.  Aborted reads, precommitted reads, lost writes, duplicates and indeterminate
  commits are all filters over this one aggregation.
* ``offsets`` — ``located`` grouped by (topic, partition, offset): which values one offset held.
* ``ranks``   — offsets known to hold a committed record, numbered per partition (for skips).
* ``reads``   — read_committed reads per consumer and partition in op order, with the
  *epoch* (number of rewind points before them) and the previous read of the same epoch.
* ``spans``   — per consumer, partition and epoch: first and last offset read, records read.

Transaction status: ``committed`` (a commit was acknowledged), ``aborted`` (an abort was
acknowledged, or the commit definitely failed, or an abort was attempted and no commit was),
``indeterminate`` (a commit of unknown outcome), ``open`` (neither: never committed).
Non-transactional writes take their status from their own ack (ok → committed, info →
indeterminate, fail → aborted).  Values whose transaction left no trace in the history are
``unknown`` and never counted as anomalies by status-based checkers.
"""

from __future__ import annotations

from functools import cached_property

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ..harness.history.schema import EventType, Isolation, Outcome
from .load import RunData

E = EventType
READ_TYPES = [E.POLL.value, E.FINAL_READ.value]
REWIND_ITEM_TYPES = [E.ASSIGN.value, E.REVOKE.value, E.SEEK.value]
COMMITTED, ABORTED, INDETERMINATE, OPEN, UNKNOWN = (
    "committed",
    "aborted",
    "indeterminate",
    "open",
    "unknown",
)
NOT_COMMITTED = [ABORTED, OPEN]


def _is(col: str, value: str) -> Column:
    return F.col(col) == F.lit(value)


def parse_value(value: Column) -> tuple[Column, Column, Column]:
    """(writer, txn, parsed_ok) from a ``writer|txn|index`` value (txn null for ``-``)."""
    parts = F.split(value, r"\|")
    ok = F.size(parts) == 3
    writer = F.when(ok, parts.getItem(0))
    txn = F.when(ok & (parts.getItem(1) != F.lit("-")), parts.getItem(1).cast("long"))
    return writer, txn, ok


class Projections:
    def __init__(self, data: RunData, persist: bool = True) -> None:
        self.data = data
        self.h = data.history
        self._persist = persist
        self._kept: list[DataFrame] = []

    def _keep(self, df: DataFrame) -> DataFrame:
        """Persist a projection several checkers read, so it is computed once."""
        if not self._persist:
            return df
        df = df.persist(StorageLevel.MEMORY_AND_DISK)
        self._kept.append(df)
        return df

    def release(self) -> None:
        for df in self._kept:
            df.unpersist()
        self._kept.clear()

    # -- transactions -------------------------------------------------------------------

    @cached_property
    def txns(self) -> DataFrame:
        h = self.h.filter(
            F.col("txn").isNotNull()
            & F.col("type").isin(
                E.BEGIN.value, E.SEND.value, E.SEND_OFFSETS.value, E.COMMIT.value, E.ABORT.value
            )
        )
        commit = _is("type", E.COMMIT.value)
        abort = _is("type", E.ABORT.value)
        ok, info, fail = (_is("outcome", o.value) for o in (Outcome.OK, Outcome.INFO, Outcome.FAIL))
        end_struct = F.struct(
            F.col("invoke_ns"),
            F.col("type"),
            F.col("outcome"),
            F.col("complete_ns"),
            F.col("error"),
        )
        agg = h.groupBy(F.col("process").alias("t_writer"), F.col("txn").alias("t_txn")).agg(
            F.sum(_is("type", E.SEND.value).cast("int")).alias("n_sends"),
            F.sum((_is("type", E.SEND.value) & _is("outcome", "ok")).cast("int")).alias("n_acked"),
            F.max(_is("type", E.SEND_OFFSETS.value)).alias("has_offsets"),
            F.min("invoke_ns").alias("begin_ns"),
            F.min(F.when(commit, F.col("invoke_ns"))).alias("commit_invoke_ns"),
            F.max(commit & ok).alias("commit_ok"),
            F.max(commit & info).alias("commit_info"),
            F.max(commit & fail).alias("commit_fail"),
            F.max(abort & ok).alias("abort_ok"),
            F.max(abort).alias("abort_any"),
            F.collect_list(F.when(commit | abort, end_struct)).alias("end_ops"),
            F.max("transactional_id").alias("transactional_id"),
            F.max("producer_id").alias("producer_id"),
        )
        status = (
            F.when(F.col("commit_ok"), F.lit(COMMITTED))
            .when(F.col("abort_ok"), F.lit(ABORTED))
            .when(F.col("commit_info"), F.lit(INDETERMINATE))
            .when(F.col("commit_fail") | F.col("abort_any"), F.lit(ABORTED))
            .otherwise(F.lit(OPEN))
        )
        return self._keep(agg.withColumn("status", status))

    # -- observations of values ---------------------------------------------------------

    @cached_property
    def _rc_reads_raw(self) -> DataFrame:
        return self.h.filter(
            F.col("type").isin(READ_TYPES)
            & F.col("value").isNotNull()
            & (F.col("isolation").isNull() | _is("isolation", Isolation.READ_COMMITTED.value))
        )

    @cached_property
    def located(self) -> DataFrame:
        cols = ["process", "op_id", "item", "type", "topic", "partition", "offset", "value"]
        reads = self._rc_reads_raw.select(
            *cols,
            F.lit("r").alias("role"),
            F.coalesce("complete_ns", "invoke_ns").alias("t"),
            F.lit(None).cast("string").alias("outcome"),
            F.lit(None).cast("long").alias("w_txn"),
            F.lit(None).cast("string").alias("source"),
            F.lit(None).cast("string").alias("group_id"),
            F.lit(None).cast("long").alias("producer_id"),
        )
        writes = self.h.filter(_is("type", E.SEND.value) & F.col("value").isNotNull()).select(
            *cols,
            F.lit("w").alias("role"),
            F.col("invoke_ns").alias("t"),
            "outcome",
            F.col("txn").alias("w_txn"),
            "source",
            "group_id",
            "producer_id",
        )
        both = reads.unionByName(writes)
        writer, txn, parsed = parse_value(F.col("value"))
        both = both.select(
            "*",
            F.when(parsed, writer)
            .otherwise(F.when(_is("role", "w"), F.col("process")))
            .alias("writer"),
            F.when(parsed, txn).otherwise(F.col("w_txn")).alias("vtxn"),
            parsed.alias("parsed"),
        )
        t = self.txns.select("t_writer", "t_txn", "status", "commit_invoke_ns")
        joined = both.join(
            F.broadcast(t),
            (both["writer"] == t["t_writer"]) & (both["vtxn"] == t["t_txn"]),
            "left",
        ).drop("t_writer", "t_txn")
        # Non-transactional writes: status from their own ack; decided in ``values``.
        return joined

    @cached_property
    def values(self) -> DataFrame:
        loc = self.located
        r = _is("role", "r")
        w = _is("role", "w")
        place = F.struct("topic", "partition", "offset", "role", "process", "op_id", "t")
        has_off = F.col("offset").isNotNull()
        v = loc.groupBy("value").agg(
            F.sum(w.cast("int")).alias("n_w"),
            F.sum(r.cast("int")).alias("n_r"),
            F.sum(_is("type", E.FINAL_READ.value).cast("int")).alias("n_final"),
            F.max(
                F.when(
                    w,
                    F.struct(
                        "process",
                        "op_id",
                        "t",
                        "outcome",
                        "topic",
                        "partition",
                        "offset",
                        "source",
                        "group_id",
                        "producer_id",
                    ),
                )
            ).alias("wr"),
            F.min(
                F.when(r, F.struct("t", "process", "op_id", "type", "topic", "partition", "offset"))
            ).alias("first_read"),
            F.min(F.when(has_off, place)).alias("loc_min"),
            F.max(F.when(has_off, place)).alias("loc_max"),
            F.first("writer", ignorenulls=True).alias("writer"),
            F.first("vtxn", ignorenulls=True).alias("vtxn"),
            F.first("status", ignorenulls=True).alias("tstatus"),
            F.first("commit_invoke_ns", ignorenulls=True).alias("commit_invoke_ns"),
        )
        wout = F.col("wr.outcome")
        plain_status = (
            F.when(wout == Outcome.OK.value, F.lit(COMMITTED))
            .when(wout == Outcome.INFO.value, F.lit(INDETERMINATE))
            .when(wout == Outcome.FAIL.value, F.lit(ABORTED))
            .otherwise(F.lit(UNKNOWN))
        )
        status = (
            F.when(F.col("tstatus").isNotNull(), F.col("tstatus"))
            .when(F.col("vtxn").isNull() & F.col("wr").isNotNull(), plain_status)
            .otherwise(F.lit(UNKNOWN))
        )
        return self._keep(v.withColumn("status", status).drop("tstatus"))

    @cached_property
    def partition_reads(self) -> DataFrame:
        """Per partition: the highest offset any read returned, and whether a final read ran."""
        return self._rc_reads_raw.groupBy("topic", "partition").agg(
            F.max("offset").alias("max_read_offset"),
            F.max(_is("type", E.FINAL_READ.value)).alias("has_final"),
        )

    @cached_property
    def offsets(self) -> DataFrame:
        loc = self.located.filter(F.col("offset").isNotNull())
        committed = _is("role", "r") | (
            _is("role", "w")
            & (
                _is("status", COMMITTED)
                | (F.col("vtxn").isNull() & F.col("parsed") & _is("outcome", Outcome.OK.value))
            )
        )
        obs = F.struct("value", "role", "process", "op_id", "t")
        return self._keep(
            loc.repartition("topic", "partition")
            .groupBy("topic", "partition", "offset")
            .agg(
                F.min(obs).alias("v_min"),
                F.max(obs).alias("v_max"),
                F.max(committed).alias("committed"),
            )
        )

    @cached_property
    def ranks(self) -> DataFrame:
        w = Window.partitionBy("topic", "partition").orderBy("offset")
        return (
            self.offsets.filter(F.col("committed"))
            .select("topic", "partition", "offset")
            .withColumn("rank", F.row_number().over(w))
        )

    # -- consumer streams -----------------------------------------------------------------

    @cached_property
    def reads(self) -> DataFrame:
        writer, txn, _ = parse_value(F.col("value"))
        base = ["process", "op_id", "item", "topic", "partition", "offset", "value"]
        reads = self._rc_reads_raw.select(
            *base,
            F.coalesce("complete_ns", "invoke_ns").alias("t"),
            writer.alias("writer"),
            txn.alias("vtxn"),
            F.lit(0).alias("is_rewind"),
        )
        rewinds = self.h.filter(
            F.col("type").isin(REWIND_ITEM_TYPES) & F.col("topic").isNotNull()
        ).select(
            "process",
            "op_id",
            "item",
            "topic",
            "partition",
            F.lit(None).cast("long").alias("offset"),
            F.lit(None).cast("string").alias("value"),
            F.col("invoke_ns").alias("t"),
            F.lit(None).cast("string").alias("writer"),
            F.lit(None).cast("long").alias("vtxn"),
            F.lit(1).alias("is_rewind"),
        )
        w = Window.partitionBy("process", "topic", "partition").orderBy("op_id", "item")
        s = reads.unionByName(rewinds).withColumn(
            "epoch",
            F.sum("is_rewind").over(w.rowsBetween(Window.unboundedPreceding, Window.currentRow)),
        )
        s = s.filter(F.col("is_rewind") == 0)
        return self._keep(
            s.select(
                "*",
                F.lag("offset").over(w).alias("prev_offset"),
                F.lag("epoch").over(w).alias("prev_epoch"),
                F.lag("value").over(w).alias("prev_value"),
                F.lag("t").over(w).alias("prev_t"),
            )
        )

    @cached_property
    def spans(self) -> DataFrame:
        r = self.reads
        return self._keep(
            r.groupBy("process", "topic", "partition", "epoch").agg(
                F.min("offset").alias("first_offset"),
                F.max("offset").alias("last_offset"),
                F.count_distinct("offset").alias("n_read"),
                F.min("t").alias("first_t"),
                F.max("t").alias("last_t"),
            )
        )
