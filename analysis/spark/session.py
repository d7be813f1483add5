"""The SparkSession of an analysis: settings every session gets, plus local-only tuning
(local_jvm.py, the class archive) for ``local[N]`` masters; a remote master (``--master
spark://...``) gets only the common settings, its driver not bound to loopback, and keeps any
setting its own configuration (spark-defaults.conf, ``spark-submit --conf``) gives."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import pyarrow.parquet as pq
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from ...rundir.run_dir import RunDir
from . import class_archive
from .local_jvm import is_local, local_conf, local_cores, local_java_options, shuffle_partitions
from .local_jvm import local_shuffle_partitions as local_shuffle_partitions

DEFAULT_MASTER = "local[2]"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: settings of every session, local or remote
COMMON_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.session.timeZone": "UTC",
    # adaptive execution re-plans every stage: only the anomaly queries earn it (pipeline.py)
    "spark.sql.adaptive.enabled": "false",
    # an analysis plans ~150 distinct generated stages: keep them all compiled
    "spark.sql.codegen.cache.maxEntries": "2000",
    # transaction tables are small: joined by broadcast, the history is not shuffled for them
    "spark.sql.autoBroadcastJoinThreshold": str(64 * 1024 * 1024),
    "spark.sql.parquet.enableVectorizedReader": "true",
    # joins on (a, b) may reuse a partitioning on b alone
    "spark.sql.requireAllClusterKeysForCoPartition": "false",
    # kept projections are read a few times: compressing them costs more CPU than it saves
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
    "spark.serializer": "org.apache.spark.serializer.KryoSerializer",
    # kept rows hold no shared or cyclic references: tracking them only costs
    "spark.kryo.referenceTracking": "false",
}


def session_conf(
    master: str, history_rows: int | None, archive_options: list[str] | None = None
) -> dict[str, str]:
    """Every Spark setting of a session on ``master``: the common ones, and for a local master
    its JVM tuning (with ``archive_options``, the class archive's JVM options)."""
    conf = dict(COMMON_CONF)
    if is_local(master):
        conf.update(local_conf(master, local_java_options(history_rows) + (archive_options or [])))
    return conf


def resolve_master(master: str | None) -> str:
    return master or os.environ.get("TXNCHAOS_SPARK_MASTER") or DEFAULT_MASTER


def get_session(
    master: str | None = None,
    app_name: str = "txnchaos-analysis",
    history_rows: int | None = None,
    conf: Mapping[str, str] | None = None,
) -> SparkSession:
    """Return the active session, or build one for ``master`` (default ``local[2]``); a local
    JVM's JIT is chosen for ``history_rows`` (see local_jvm.jit_mode); ``conf`` (``--conf
    K=V``) overrides any setting of ours."""
    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    if active is not None:
        # one SparkContext per process: the builder would hand back this one, on the wrong
        # master, with a warning only
        active.stop()
    master = resolve_master(master)
    archive = class_archive.plan() if is_local(master) else None
    settings = session_conf(master, history_rows, archive.java_options() if archive else None)
    settings.update(conf or {})
    if is_local(master):
        # before the JVM starts: bind to loopback without the "resolves to a loopback address"
        # warning
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    b = SparkSession.builder.master(master).appName(app_name)
    for key, value in settings.items():
        b = b.config(key, value)
    spark = b.getOrCreate()
    # the driver's console: errors only (a failed task fails its job, whose exception reaches
    # Python); executors on a cluster keep their own logging
    spark.sparkContext.setLogLevel("ERROR")
    if is_local(master):
        class_archive.after_start(archive, spark.sparkContext._gateway)
    return spark


def describe(spark: SparkSession) -> dict[str, Any]:
    """The Spark application a verdict names: master, application id and name, version."""
    sc = spark.sparkContext
    return {
        "master": str(sc.master),
        "app_id": str(sc.applicationId),
        "app_name": str(sc.appName),
        "version": str(spark.version),
    }


def submitted_session(app_name: str = "txnchaos-analysis") -> SparkSession:
    """The session of a process ``spark-submit`` started: its master and settings (``--master``,
    ``--conf``, spark-defaults.conf) as given, the common settings for what they leave unset,
    and no local JVM tuning (spark-submit has started the JVM already)."""
    SparkContext._ensure_initialized()  # the JVM spark-submit started, with its settings
    conf = SparkConf()
    for key, value in COMMON_CONF.items():
        if not conf.contains(key):
            conf.set(key, value)
    spark = SparkSession.builder.appName(app_name).config(conf=conf).getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def history_rows(run: RunDir) -> int | None:
    """Rows of the run's history.parquet (from its footer), or None if it has none yet."""
    if run.history_parquet is None:
        return None
    return int(pq.ParquetFile(run.history_parquet).metadata.num_rows)


def tune_session(spark: SparkSession, rows: int | None) -> None:
    """Shuffle partitions by the history's ``rows`` (None leaves them as they are): on a local
    master by its cores; on a cluster by its executor cores, unless its own configuration sets
    them (Spark's default of 200 tasks per shuffle dwarfs a small history's work)."""
    if rows is None:
        return
    sc = spark.sparkContext
    master = str(sc.master)
    if is_local(master):
        n = local_shuffle_partitions(rows, local_cores(master))
    elif sc.getConf().contains(SHUFFLE_PARTITIONS):
        return
    else:
        n = shuffle_partitions(rows, sc.defaultParallelism)
    spark.conf.set(SHUFFLE_PARTITIONS, str(n))
