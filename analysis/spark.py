"""SparkSession factory tuned for short local jobs (and a ``--master`` override for clusters).

Local defaults: ``local[2]``, UI off, driver bound to 127.0.0.1, few shuffle partitions (the data
of one run is small per core, so many partitions only add task overhead), adaptive execution on,
a generous broadcast threshold (transaction tables are small and joining them by broadcast avoids
shuffles of the history).  With a remote master the driver is not bound to loopback (executors
must reach it) and Spark's own partitioning defaults apply.
"""

from __future__ import annotations

import os

from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[2]"


def _is_local(master: str) -> bool:
    return master.startswith("local")


def get_session(master: str | None = None, app_name: str = "txnchaos-analysis") -> SparkSession:
    """Return the active session, or build one for ``master`` (default ``local[2]``)."""
    active = SparkSession.getActiveSession()
    if active is not None and (master is None or active.sparkContext.master == master):
        return active
    master = master or os.environ.get("TXNCHAOS_SPARK_MASTER") or DEFAULT_MASTER
    b = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.adaptive.enabled", "true")
        .config("spark.sql.autoBroadcastJoinThreshold", str(64 * 1024 * 1024))
        .config("spark.sql.parquet.enableVectorizedReader", "true")
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
    )
    if _is_local(master):
        b = (
            b.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.default.parallelism", "4")
            .config("spark.driver.memory", os.environ.get("TXNCHAOS_SPARK_MEMORY", "4g"))
            .config("spark.sql.adaptive.coalescePartitions.enabled", "true")
        )
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
