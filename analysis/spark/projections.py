"""Shared projections of a history, described once per analysis and read by several checkers.

Checkers only *describe* DataFrames over these; the pipeline runs every checker's frames in one
Spark job (pipeline.py).  Two shuffles of the history carry almost all the work; their results
are cached because several checkers read them (without the cache each reader would get its own
column-pruned copy of the plan, and Spark would shuffle the history once per reader):

* by **value** — ``placements``: every observation of a record value (read_committed reads, role
  ``r``; producer acks, role ``w``) aggregated per (value, place), a place being a (topic,
  partition, offset); from it ``values`` (per value: written, read, finally read, first read,
  its write, its places, its transaction's fate) and ``offsets`` (per place: how many distinct
  values, committed or not, and the rank among the partition's committed offsets).
* by **(process, topic, partition)** — ``stream``: reads, the consumers' rewind points and the
  producers' committed writes, sorted in op order once; one window pass numbers the *epochs*
  (rewind points before a read: assign, revoke or seek of that partition, or a restart of the
  process) and finds each read's previous read and each committed write's previous committed
  write.  ``reads``, ``spans`` and ``partition_reads`` derive from it.

Every aggregation here has fixed-width buffers only (counts, min/max of numbers, ``max_by`` of
numbers), so Spark runs it as a hash aggregation; names are replaced by ranks (summary.py) and
packed into numbers (engine/packed_keys.py): a *place* ``tp_key << 40 | offset`` orders like
(topic, partition, offset), ``write_key = proc_rank << 40 | op_id`` like (process, op_id).  The
structs the checkers show as evidence are built
afterwards, for the few example anomalies only (``exact_values``, ``exact_offsets``).

* ``txns`` — one row per transaction ``(writer, txn)``: its fate (``status``).  Small; joined by
  broadcast.

Transaction status: ``committed`` (a commit was acknowledged), ``aborted`` (an abort was
acknowledged, or the commit definitely failed, or an abort was attempted and no commit was),
``indeterminate`` (a commit of unknown outcome), ``open`` (neither: never committed).
Non-transactional writes take their status from their own ack (ok → committed, info →
indeterminate, fail → aborted).  Values whose transaction left no trace in the history are
``unknown`` and never counted as anomalies by status-based checkers.  A read or ack without a
topic has no place.
"""

from __future__ import annotations

from functools import reduce
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from ...rundir.schema import EventType, Isolation, Outcome
from .checkers.ordering import order_broken
from .load import RunData
from .packed_keys import (
    name_key,
    observation_is_write,
    observation_key,
    observation_op_id,
    observation_proc_rank,
    op_key,
    op_key_proc_rank,
    output_key,
    pack_place,
    pack_tp,
    place_offset,
    place_tp,
    tp_partition,
    tp_topic_rank,
)
from .parallel import shared_property
from .summary import Summary

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
#: an observation's (and a value's greatest write's) :func:`output_key`
OUTPUT_KEYS = ("out_k1", "out_k2")
READ, WRITE, REWIND = "r", "w", "x"
#: a write's outcome as a number (aggregation buffers must be fixed-width)
OUTCOME_CODES = {Outcome.OK.value: 1, Outcome.INFO.value: 2, Outcome.FAIL.value: 3}
FAIL_CODE = OUTCOME_CODES[Outcome.FAIL.value]


def _is(col: str, value: str) -> Column:
    return F.col(col) == F.lit(value)


def parse_value(value: Column) -> tuple[Column, Column, Column]:
    """(writer, txn, parsed_ok) from a ``writer|txn|index`` value (txn null for ``-`` or when it
    is not a number); ``parsed_ok``: the value holds exactly two ``|``.

    Found by position (``locate``, ``substring``) on Spark's own string bytes: ``split``
    decodes each value into a Java ``String``, splits that and encodes the parts back."""
    bar = F.lit("|")
    first = F.call_function("locate", bar, value)
    second = F.call_function("locate", bar, value, first + 1)
    third = F.call_function("locate", bar, value, second + 1)
    ok = (first > 0) & (second > 0) & (third == 0)
    writer = F.when(ok, F.substring(value, F.lit(1), first - 1))
    txn_s = F.substring(value, first + 1, second - first - 1)
    txn = F.when(ok & (txn_s != F.lit("-")), txn_s.try_cast("long"))
    return writer, txn, ok


OTHER_CODE = 4  #: an outcome string other than ok/info/fail
#: a non-transactional write's status from its own ack's outcome code
PLAIN_STATUS = {
    OUTCOME_CODES[Outcome.OK.value]: COMMITTED,
    OUTCOME_CODES[Outcome.INFO.value]: INDETERMINATE,
    FAIL_CODE: ABORTED,
}


def _case(col: Column, mapping: dict[Any, Any]) -> Column:
    """``CASE col WHEN k THEN v ...`` for the items of ``mapping`` (null where none matches)."""
    (k0, v0), *rest = mapping.items()
    out = F.when(col == F.lit(k0), F.lit(v0))
    for k, v in rest:
        out = out.when(col == F.lit(k), F.lit(v))
    return out


def outcome_code(col: Column) -> Column:
    return _case(col, OUTCOME_CODES).when(col.isNotNull(), F.lit(OTHER_CODE))


def obs_role(key: Column) -> Column:
    return F.when(observation_is_write(key), F.lit(WRITE)).otherwise(F.lit(READ))


STATUS_CODES = {COMMITTED: 1, ABORTED: 2, INDETERMINATE: 3, OPEN: 4}


def _status_code(col: Column) -> Column:
    return _case(col, STATUS_CODES)


def _status_name(code: Column) -> Column:
    return _case(code, {c: name for name, c in STATUS_CODES.items()})


class Projections:
    def __init__(self, data: RunData, summary: Summary, persist: bool = True) -> None:
        self.data = data
        self.h = data.history
        self.summary = summary
        self._persist = persist
        sc = self.h.sparkSession.sparkContext
        self._rdds_before = set(dict(sc._jsc.getPersistentRDDs()).keys())
        self.proc_names = summary.processes
        self.topic_names = summary.topics

    def keep(self, df: DataFrame) -> DataFrame:
        """Materialise a frame read more than once (released with the projections)."""
        return self._keep(df)

    def _keep(self, df: DataFrame) -> DataFrame:
        """Materialise a projection several checkers read (see the module docstring), as a
        local checkpoint: computed once, by the first job that needs it; its rows are kept as
        they are (no columnar encoding) and its partitioning is kept, and frames built on it
        start from it rather than from the whole plan that made it (building a DataFrame
        costs an analysis of its plan, so a short plan is a cheap one).

        Kept serialized (PySpark's ``MEMORY_AND_DISK``, not Spark's deserialized default): a
        few compact byte blocks per partition instead of two objects per row for the garbage
        collector to trace and copy (bench/README.md)."""
        if not self._persist:
            return df
        return df.localCheckpoint(eager=False, storageLevel=StorageLevel.MEMORY_AND_DISK)

    def prepare(self) -> None:
        """Describe what the projections share (the transactions, the rank tables) once, on
        this thread, before threads materialise projections that read them (engine/parallel.py)."""
        _ = self.txns, self._rank_tables

    @staticmethod
    def materialise(*frames: DataFrame) -> None:
        """Compute kept projections now (each kept frame is computed by the first job that
        reads it, and then read from memory)."""
        for df in frames:
            df.count()

    def release(self) -> None:
        """Drop the materialised projections (the RDDs persisted since this object was made)."""
        sc = self.h.sparkSession.sparkContext
        for rdd_id, rdd in dict(sc._jsc.getPersistentRDDs()).items():
            if rdd_id not in self._rdds_before:
                rdd.unpersist(False)

    # -- ranks and names ------------------------------------------------------------------

    @shared_property
    def _rank_tables(self) -> tuple[DataFrame, DataFrame]:
        """(process -> rank, topic -> rank) as tiny tables to broadcast, each row keyed by its
        name's 64-bit hash (``_proc_key``, ``_topic_key``; from the summary) when those hashes
        differ, else by the name itself (``_proc_name``, ``_topic_name``)."""
        return (
            self._rank_table(self.proc_names, self.summary.process_keys, "_proc"),
            self._rank_table(self.topic_names, self.summary.topic_keys, "_topic"),
        )

    def _rank_table(self, names: list[str], keys: dict[str, int], prefix: str) -> DataFrame:
        spark = self.h.sparkSession
        hashes = [keys.get(n) for n in names]
        if None not in hashes and len(set(hashes)) == len(hashes):
            return spark.createDataFrame(
                list(enumerate(hashes)), f"{prefix}_rank int, {prefix}_key long"
            )
        return spark.createDataFrame(
            list(enumerate(names)), f"{prefix}_rank int, {prefix}_name string"
        )

    @staticmethod
    def _rank_join(df: DataFrame, table: DataFrame, col: str, prefix: str) -> DataFrame:
        """``df`` left-joined to a rank table (:meth:`_rank_table` with ``prefix``) on its
        ``col``: by the name's hash where the table is keyed so (a hash table of longs; no key
        bytes compared), else by name.  Hashes stand for names exactly: the tables hold every
        process of the history and every topic that has a partition in it (a rank is used only
        with a partition), with distinct hashes, and a null name matches nothing."""
        name, key = f"{prefix}_name", f"{prefix}_key"
        if key in table.columns:
            return df.join(F.broadcast(table), name_key(F.col(col)) == F.col(key), "left").drop(key)
        return df.join(F.broadcast(table), F.col(col) == F.col(name), "left").drop(name)

    def with_ranks(self, df: DataFrame, tp: bool = True) -> DataFrame:
        """``df`` plus ``_proc_rank`` (of its ``process``) and, with ``tp``, ``_tp`` (the tp key
        of its ``topic`` and ``partition``, null where either is), by broadcast hash joins.
        For the millions of rows the projections key this way a hash probe per row is cheaper
        than a linear search of the sorted names (:meth:`tp_key`; bench/README.md)."""
        procs, topics = self._rank_tables
        df = self._rank_join(df, procs, "process", "_proc")
        if not tp:
            return df
        df = self._rank_join(df, topics, "topic", "_topic")
        rank, partition = F.col("_topic_rank"), F.col("partition")
        tp_key = F.when(rank.isNotNull() & partition.isNotNull(), pack_tp(rank, partition))
        return df.select("*", tp_key.alias("_tp")).drop("_topic_rank")

    def tp_key(self, topic: Column, partition: Column) -> Column:
        """The tp key of (topic, partition), the topic's rank found by a linear search of a
        literal array: for a few rows (for the bulk of the history :meth:`with_ranks`)."""
        names = F.array(*(F.lit(t) for t in self.topic_names or [""]))
        rank = F.array_position(names, topic) - 1
        return F.when(topic.isNotNull() & partition.isNotNull(), pack_tp(rank, partition))

    def proc_name(self, rank: Column) -> Column:
        if not self.proc_names:
            return F.lit(None).cast("string")
        names = F.array(*(F.lit(p) for p in self.proc_names))
        return F.when(rank.isNotNull(), F.element_at(names, rank.cast("int") + 1))

    def tp_topic(self, tp: Column) -> Column:
        if not self.topic_names:
            return F.lit(None).cast("string")
        names = F.array(*(F.lit(t) for t in self.topic_names))
        return F.when(tp.isNotNull(), F.element_at(names, tp_topic_rank(tp) + 1))

    @staticmethod
    def tp_partition(tp: Column) -> Column:
        return tp_partition(tp)

    # -- transactions -------------------------------------------------------------------

    @shared_property
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
        agg = h.groupBy(F.col("process").alias("t_writer"), F.col("txn").alias("t_txn")).agg(
            F.sum(_is("type", E.SEND.value).cast("int")).alias("n_sends"),
            F.sum((_is("type", E.SEND.value) & _is("outcome", "ok")).cast("int")).alias("n_acked"),
            F.max(_is("type", E.SEND_OFFSETS.value)).alias("has_offsets"),
            F.min(F.when(commit, F.col("invoke_ns"))).alias("commit_invoke_ns"),
            F.max(commit & ok).alias("commit_ok"),
            F.max(commit & info).alias("commit_info"),
            F.max(commit & fail).alias("commit_fail"),
            F.max(abort & ok).alias("abort_ok"),
            F.max(abort).alias("abort_any"),
            # for the report's open transactions over time
            F.min("invoke_ns").alias("begin_ns"),
            F.max(F.when(commit | abort, F.col("complete_ns"))).alias("end_ns"),
        )
        status = (
            F.when(F.col("commit_ok"), F.lit(COMMITTED))
            .when(F.col("abort_ok"), F.lit(ABORTED))
            .when(F.col("commit_info"), F.lit(INDETERMINATE))
            .when(F.col("commit_fail") | F.col("abort_any"), F.lit(ABORTED))
            .otherwise(F.lit(OPEN))
        )
        return self._keep(agg.withColumn("status", status))

    def _with_txn(
        self, df: DataFrame, writer: Column, txn: Column, only: Column | None
    ) -> DataFrame:
        """``df`` plus its transaction's ``status`` and ``commit_invoke_ns`` (broadcast join;
        rows where ``only`` is false are not looked up)."""
        t = F.broadcast(self.txns.select("t_writer", "t_txn", "status", "commit_invoke_ns"))
        if only is not None:
            writer, txn = F.when(only, writer), F.when(only, txn)
        df = df.select("*", writer.alias("_jw"), txn.alias("_jt"))
        return df.join(t, (df["_jw"] == t["t_writer"]) & (df["_jt"] == t["t_txn"]), "left").drop(
            "_jw", "_jt", "t_writer", "t_txn"
        )

    # -- observations ---------------------------------------------------------------------

    def observations(self, rewinds: bool = False, history: DataFrame | None = None) -> DataFrame:
        """Reads (role ``r``), acknowledged sends (``w``) and optionally the items of rewind ops
        (``x``), from one scan: nothing per row but projections (no joins, no parsing)."""
        h = self.h if history is None else history
        is_w = _is("type", E.SEND.value)
        is_r = (
            F.col("type").isin(READ_TYPES)
            & F.col("value").isNotNull()
            & (F.col("isolation").isNull() | _is("isolation", Isolation.READ_COMMITTED.value))
        )
        keep = (is_w & F.col("value").isNotNull()) | is_r
        out_keys = output_key(F.col("group_id"), F.col("source"))
        role = F.when(is_w, F.lit(WRITE)).otherwise(F.lit(READ))
        if rewinds:
            is_x = F.col("type").isin(REWIND_ITEM_TYPES) & F.col("topic").isNotNull()
            keep = keep | is_x
            role = F.when(is_x, F.lit(REWIND)).otherwise(role)
        return h.filter(keep).select(
            "process",
            "op_id",
            "item",
            "type",
            "topic",
            "partition",
            "offset",
            "value",
            role.alias("role"),
            F.when(is_w | ~is_r, F.col("invoke_ns"))
            .otherwise(F.coalesce("complete_ns", "invoke_ns"))
            .alias("t"),
            F.when(is_w, F.col("outcome")).alias("outcome"),
            F.when(is_w, F.col("txn")).alias("write_txn"),
            F.when(is_w, F.col("source")).alias("source"),
            F.when(is_w, F.col("group_id")).alias("group_id"),
            F.when(is_w, F.col("producer_id")).alias("producer_id"),
            *(F.when(is_w, k).alias(n) for n, k in zip(OUTPUT_KEYS, out_keys, strict=True)),
        )

    # -- by value ---------------------------------------------------------------------------

    @shared_property
    def placements(self) -> DataFrame:
        """Per (value, place): observations, the greatest write among them (by process, op_id:
        what ``max(struct(process, op_id, ...))`` picks), the least and greatest observation,
        the value's transaction status, and whether the place holds a committed record."""
        obs = self.with_ranks(self.observations())
        w, r = _is("role", WRITE), _is("role", READ)
        tp, rank = F.col("_tp"), F.col("_proc_rank")
        obs = obs.select(
            "value",
            "t",
            "write_txn",
            w.alias("is_w"),
            r.alias("is_r"),
            _is("type", E.FINAL_READ.value).alias("is_final"),
            outcome_code(F.col("outcome")).alias("outcome_code"),
            F.when(
                tp.isNotNull() & F.col("offset").isNotNull(),
                pack_place(tp, F.col("offset")),
            ).alias("place"),
            tp.alias("tp"),
            "offset",
            F.when(w, op_key(rank, F.col("op_id"))).alias("write_key"),
            observation_key(w, rank, F.col("op_id")).alias("obs_key"),
            *OUTPUT_KEYS,
        ).repartition("value")
        agg = obs.groupBy("value", "place").agg(
            F.sum(F.col("is_w").cast("int")).alias("n_writes"),
            F.sum(F.col("is_r").cast("int")).alias("n_reads"),
            F.sum(F.col("is_final").cast("int")).alias("n_final_reads"),
            F.min(F.when(F.col("is_r"), F.col("t"))).alias("first_read_ns"),
            F.max("write_key").alias("write_key"),
            F.max_by("t", "write_key").alias("write_ns"),
            F.max_by("outcome_code", "write_key").alias("write_outcome"),
            F.max_by("write_txn", "write_key").alias("write_txn"),
            F.max_by("tp", "write_key").alias("write_tp"),
            F.max_by("offset", "write_key").alias("write_offset"),
            *(F.max_by(k, "write_key").alias(k) for k in OUTPUT_KEYS),
            F.max(F.col("is_w") & (F.col("outcome_code") == OUTCOME_CODES[Outcome.OK.value])).alias(
                "any_ok"
            ),
            F.min("obs_key").alias("least_obs"),
            F.min_by("t", "obs_key").alias("least_obs_ns"),
            F.max("obs_key").alias("greatest_obs"),
            F.max_by("t", "obs_key").alias("greatest_obs_ns"),
        )
        # the value's transaction: parsed from the value, else the writer's own (a value not in
        # the writer|txn|index form is attributed to whoever wrote it)
        writer, txn, parsed = parse_value(F.col("value"))
        agg = agg.select(
            "*",
            parsed.alias("parsed"),
            F.when(parsed, txn).otherwise(F.col("write_txn")).alias("value_txn"),
        )
        w_proc = self.proc_name(op_key_proc_rank(F.col("write_key")))
        agg = self._with_txn(
            agg, F.when(parsed, writer).otherwise(w_proc), F.col("value_txn"), None
        )
        committed = (F.col("n_reads") > 0) | (
            (F.col("n_writes") > 0)
            & (
                _is("status", COMMITTED)
                | (F.col("value_txn").isNull() & F.col("parsed") & F.col("any_ok"))
            )
        )
        agg = agg.select(
            "*",
            committed.alias("committed"),
            _status_code(F.col("status")).alias("txn_status_code"),
        ).drop("status")
        return self._keep(agg)

    @shared_property
    def values(self) -> DataFrame:
        """Per value: ``n_writes``, ``n_reads``, ``n_final_reads``, ``first_read_ns``; its
        greatest write (``write_key``, ``write_ns``, ``write_outcome`` code, ``write_tp``,
        ``write_offset``, and ``out_k1``/``out_k2``: its :func:`output_key` when it is a
        copier's output); ``least_place`` (loc_min) with ``least_place_obs``/``_ns`` (its least
        observation there), ``greatest_place``/``greatest_place_obs``/``_ns`` (only where it
        differs: a duplicate); ``writer``, ``value_txn``, ``status``, ``commit_invoke_ns``."""
        p = self.placements
        v = p.groupBy("value").agg(
            F.sum("n_writes").alias("n_writes"),
            F.sum("n_reads").alias("n_reads"),
            F.sum("n_final_reads").alias("n_final_reads"),
            F.min("first_read_ns").alias("first_read_ns"),
            F.max("write_key").alias("write_key"),
            F.max_by("write_ns", "write_key").alias("write_ns"),
            F.max_by("write_outcome", "write_key").alias("write_outcome"),
            F.max_by("write_txn", "write_key").alias("write_txn"),
            F.max_by("write_tp", "write_key").alias("write_tp"),
            F.max_by("write_offset", "write_key").alias("write_offset"),
            *(F.max_by(k, "write_key").alias(k) for k in OUTPUT_KEYS),
            F.min("place").alias("least_place"),
            F.max("place").alias("greatest_place"),
            # loc_min / loc_max: the least observation at the least place, the greatest at the
            # greatest
            F.min_by("least_obs", "place").alias("least_place_obs"),
            F.min_by("least_obs_ns", "place").alias("least_place_obs_ns"),
            F.max_by("greatest_obs", "place").alias("greatest_place_obs"),
            F.max_by("greatest_obs_ns", "place").alias("greatest_place_obs_ns"),
            # the same for every place of a value in writer|txn|index form
            F.max("txn_status_code").alias("txn_status_code"),
            F.max("commit_invoke_ns").alias("commit_invoke_ns"),
        )
        writer, txn, parsed = parse_value(F.col("value"))
        w_proc = self.proc_name(op_key_proc_rank(F.col("write_key")))
        wout = F.col("write_outcome")
        plain_status = _case(wout, PLAIN_STATUS).otherwise(F.lit(UNKNOWN))
        value_txn = F.when(parsed, txn).otherwise(F.col("write_txn"))
        status = (
            F.when(F.col("txn_status_code").isNotNull(), _status_name(F.col("txn_status_code")))
            .when(value_txn.isNull() & F.col("write_key").isNotNull(), plain_status)
            .otherwise(F.lit(UNKNOWN))
        )
        v = v.select(
            "value",
            "n_writes",
            "n_reads",
            "n_final_reads",
            "first_read_ns",
            "write_key",
            "write_ns",
            "write_outcome",
            "write_tp",
            "write_offset",
            *OUTPUT_KEYS,
            "least_place",
            "least_place_obs",
            "least_place_obs_ns",
            # kept only where it differs (a duplicate)
            F.when(F.col("greatest_place") != F.col("least_place"), F.col("greatest_place")).alias(
                "greatest_place"
            ),
            "greatest_place_obs",
            "greatest_place_obs_ns",
            F.when(parsed, writer).otherwise(w_proc).alias("writer"),
            value_txn.alias("value_txn"),
            parsed.alias("parsed"),
            status.alias("status"),
            "commit_invoke_ns",
        )
        return self._keep(v)

    @shared_property
    def offsets(self) -> DataFrame:
        """Per place: how many distinct values were observed there, whether it is known to hold
        a committed record (read by anyone, or acked by a committed write), and ``rank``: the
        number of committed places of the partition up to it."""
        p = self.placements.filter(F.col("place").isNotNull())
        p = p.select(place_tp(F.col("place")).alias("tp"), "place", "committed")
        o = (
            p.repartition("tp")
            .groupBy("tp", "place")
            .agg(F.count(F.lit(1)).alias("n_values"), F.max("committed").alias("committed"))
        )
        w = Window.partitionBy("tp").orderBy("place")
        rank = F.sum(F.col("committed").cast("long")).over(
            w.rowsBetween(Window.unboundedPreceding, Window.currentRow)
        )
        return self._keep(o.select("*", F.when(F.col("committed"), rank).alias("rank")))

    def place_struct(self, place: Column, obs_key: Column, t: Column) -> Column:
        """The evidence struct of an observation at a place: (topic, partition, offset, role,
        process, op_id, t)."""
        tp = place_tp(place)
        return F.when(
            place.isNotNull(),
            F.struct(
                self.tp_topic(tp).alias("topic"),
                self.tp_partition(tp).alias("partition"),
                place_offset(place).alias("offset"),
                obs_role(obs_key).alias("role"),
                self.proc_name(observation_proc_rank(obs_key)).alias("process"),
                observation_op_id(obs_key).alias("op_id"),
                t.alias("t"),
            ),
        )

    def observation_struct(self, value: Column, obs_key: Column, t: Column) -> Column:
        """(value, role, process, op_id, t) of an observation."""
        return F.struct(
            value.alias("value"),
            obs_role(obs_key).alias("role"),
            self.proc_name(observation_proc_rank(obs_key)).alias("process"),
            observation_op_id(obs_key).alias("op_id"),
            t.alias("t"),
        )

    # -- per (process, topic, partition) ------------------------------------------------------

    @shared_property
    def stream(self) -> DataFrame:
        """Reads (kind 0) and committed writes (kind 1: acked sends of a committed transaction
        of their producer) in op order per (process, topic, partition) — the stream — with the
        read's epoch; ``prev`` (offset, value, t, op_id of the previous row of the same kind) is
        kept only where the ordering checker's rule says the order broke
        (``checkers.ordering.order_broken``).  Committed writes are kept only there."""
        obs = self.observations(rewinds=True)
        w = _is("role", WRITE)
        # only writes need their transaction (for "committed"), and a write is the producer's
        # own: its op's (process, txn), with no parsing of the value (what the value claims is
        # the value-level checkers' business)
        obs = self._with_txn(obs, F.col("process"), F.col("write_txn"), w)
        is_x, is_r = _is("role", REWIND), _is("role", READ)
        cwrite = w & _is("status", COMMITTED) & F.col("offset").isNotNull()
        obs = self.with_ranks(obs.filter(is_x | is_r | cwrite))
        rank, tp = F.col("_proc_rank"), F.col("_tp")
        obs = obs.select(
            op_key(rank, tp).alias("stream"),
            F.when(cwrite, F.lit(1)).otherwise(F.lit(0)).alias("kind"),
            rank.alias("proc_rank"),
            tp.alias("tp"),
            "op_id",
            "item",
            "offset",
            "value",
            "t",
            is_x.alias("is_rewind"),
            _is("type", E.FINAL_READ.value).alias("is_final"),
        )
        win = Window.partitionBy("stream", "kind").orderBy("op_id", "item")
        epoch = (
            F.sum(F.col("is_rewind").cast("int")).over(
                win.rowsBetween(Window.unboundedPreceding, Window.currentRow)
            )
            + self._restarts_before()
        )
        s = obs.repartition("stream").withColumn("epoch", epoch).filter(~F.col("is_rewind"))
        prev = {c: F.lag(c).over(win) for c in ("offset", "value", "t", "op_id", "epoch")}
        broken = order_broken(F.col("kind"), F.col("epoch"), F.col("offset"), prev)
        prev_s = F.struct(*(prev[c].alias(c) for c in ("offset", "value", "t", "op_id")))
        s = s.select(
            "stream",
            "kind",
            "proc_rank",
            "tp",
            "op_id",
            "offset",
            "value",
            "t",
            "is_final",
            "epoch",
            F.when(broken, prev_s).alias("prev"),
        )
        return self._keep(s.filter((F.col("kind") == 0) | F.col("prev").isNotNull()))

    def _restarts_before(self) -> Column:
        """Per stream row: how many restarts (``start`` ops) its process had before this op."""
        starts = {
            rank: self.summary.starts[p]
            for rank, p in enumerate(self.proc_names)
            if p in self.summary.starts
        }
        if not starts:
            return F.lit(0)
        m = F.create_map(
            *[x for r, ops in starts.items() for x in (F.lit(r), F.array(*map(F.lit, ops)))]
        )
        op_id = F.col("op_id")
        before = F.filter(F.try_element_at(m, F.col("proc_rank")), lambda x: x < op_id)
        return F.coalesce(F.size(before), F.lit(0))

    @shared_property
    def reads(self) -> DataFrame:
        return self.stream.filter(F.col("kind") == 0)

    @shared_property
    def partition_reads(self) -> DataFrame:
        """Per partition: the highest offset any read returned, and whether a final read ran."""
        return self.reads.groupBy("tp").agg(
            F.max("offset").alias("max_read_offset"),
            F.max("is_final").alias("has_final"),
        )

    @shared_property
    def spans(self) -> DataFrame:
        """Per consumer, partition and epoch: first and last offset read, distinct offsets
        read (``n_read``), first and last read time; ``backwards``: some read of the epoch was
        not above the previous one, or had no offset.  Only such an epoch can return an offset
        twice (elsewhere offsets strictly increase), so only there are distinct offsets
        counted the expensive way."""
        key = ["stream", "proc_rank", "tp", "epoch"]
        s = self.reads.groupBy(*key).agg(
            F.min("offset").alias("first_offset"),
            F.max("offset").alias("last_offset"),
            F.count("offset").alias("n_offsets"),
            F.min("t").alias("first_t"),
            F.max("t").alias("last_t"),
            F.max(F.col("prev").isNotNull() | F.col("offset").isNull()).alias("backwards"),
        )
        back = F.broadcast(s.filter(F.col("backwards")).select(*key))
        distinct = (
            self.reads.join(back, key)
            .groupBy(*key)
            .agg(F.count_distinct("offset").alias("n_distinct"))
        )
        s = s.join(F.broadcast(distinct), key, "left").select(
            *key,
            "first_offset",
            "last_offset",
            F.coalesce("n_distinct", "n_offsets").alias("n_read"),
            "first_t",
            "last_t",
            "backwards",
        )
        return self._keep(s)

    @shared_property
    def span_skips(self) -> DataFrame:
        """Spans with ``rank_a``/``rank_b`` (the ranks of their first and last offset among the
        partition's committed offsets) and ``skipped``: committed offsets in between that the
        span did not return.  Spans are few: their ends are broadcast and the offsets probed
        once."""
        s = self.spans.select(
            "*",
            pack_place(F.col("tp"), F.col("first_offset")).alias("place_a"),
            pack_place(F.col("tp"), F.col("last_offset")).alias("place_b"),
        )
        ends = s.select(F.explode(F.array("place_a", "place_b")).alias("place")).distinct()
        rk = self.offsets.filter(F.col("committed")).select("place", "rank")
        rk = rk.join(F.broadcast(ends), "place")
        ra = F.broadcast(rk.select(F.col("place").alias("pa"), F.col("rank").alias("rank_a")))
        rb = F.broadcast(rk.select(F.col("place").alias("pb"), F.col("rank").alias("rank_b")))
        j = s.join(ra, s["place_a"] == ra["pa"]).join(rb, s["place_b"] == rb["pb"])
        skipped = F.col("rank_b") - F.col("rank_a") + 1 - F.col("n_read")
        return self._keep(j.withColumn("skipped", skipped))

    # -- exact evidence for a few values ----------------------------------------------------

    def _subset(self, values: list[str], places: list[tuple[str, int, int]]) -> DataFrame:
        """Observations of the given values, or at the given (topic, partition, offset)."""
        obs = self.observations()
        cond = F.lit(False)
        if values:
            cond = cond | F.col("value").isin(values)
        if places:
            cond = cond | reduce(
                lambda a, b: a | b,
                [
                    (F.col("topic") == t) & (F.col("partition") == p) & (F.col("offset") == o)
                    for t, p, o in places
                ],
            )
        return obs.filter(cond)

    def exact_values(self, values: list[str]) -> DataFrame:
        """The evidence structs of the given values, as the checkers show them: ``wr`` (the
        greatest write), ``first_read``, ``loc_min``/``loc_max`` (least/greatest place)."""
        loc = self._subset(values, [])
        r, w = _is("role", READ), _is("role", WRITE)
        place = F.struct("topic", "partition", "offset", "role", "process", "op_id", "t")
        has_off = F.col("offset").isNotNull()
        return loc.groupBy("value").agg(
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
        )

    def exact_offsets(self, places: list[tuple[str, int, int]]) -> DataFrame:
        """The least and greatest observation (value, role, process, op_id, t) at each place."""
        loc = self._subset([], places)
        obs = F.struct("value", "role", "process", "op_id", "t")
        return loc.groupBy("topic", "partition", "offset").agg(
            F.min(obs).alias("v_min"), F.max(obs).alias("v_max")
        )
