"""SparkSession factory tuned for short local jobs (and a ``--master`` override for clusters).

Local defaults: ``local[2]``, UI off, driver bound to 127.0.0.1 (``SPARK_LOCAL_IP`` is set before
the JVM starts, so Spark does not warn that the hostname resolves to loopback), Spark's classes
mapped from a class-data-sharing archive an earlier run wrote (class_archive.py), log4j at ERROR
(real errors stay visible; Spark's start-up chatter does not), the parallel garbage collector
(``GC_OPTIONS``), Spark's own memory off the heap (``DEFAULT_OFF_HEAP``), few shuffle
partitions (``tune_session`` picks them from the history's size: the data of one run is small
per core, and every extra partition is another task per stage), a generous broadcast threshold
(transaction tables are small and joining them by broadcast avoids shuffles of the history).
With a remote master the driver is not bound to loopback (executors must reach it) and Spark's
own logging, memory and partitioning defaults apply.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import SparkSession

from ..harness.history.run_dir import RunDir
from . import class_archive

DEFAULT_MASTER = "local[2]"
#: log4j2 configuration of local sessions: errors only, on stderr (Spark's start-up chatter —
#: NativeCodeLoader, default-profile notices — stays quiet; real errors stay visible).  A
#: failed task is not logged: in a local session it fails its job, whose exception (with the
#: task's) reaches Python, which says what it means (an unreadable file: one line, exit 2)
LOG4J_PROPERTIES = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.parquet.name = org.apache.parquet.CorruptStatistics
logger.parquet.level = fatal
logger.repl.name = org.apache.spark.repl.Main
logger.repl.level = error
logger.task.name = org.apache.spark.executor.Executor
logger.task.level = fatal
logger.taskset.name = org.apache.spark.scheduler.TaskSetManager
logger.taskset.level = fatal
"""
#: histories up to this many rows are judged with the JVM's quick JIT tier only (C1): the
#: optimising compiler (C2) spends ~20 CPU-seconds compiling Spark and the generated stages,
#: which a short job never earns back (measured: a 1,000-event history 46 -> 24 JVM CPU-s, a
#: 1.5M-event one 77 -> 51); a 10M-event history runs long enough for C2's faster code to win
#: (220 vs 271 CPU-s)
QUICK_JIT_ROWS = 4_000_000
JIT_MODES = ("quick", "full")
#: classes a long (``full`` JIT) analysis keeps out of C2, the optimising compiler: code that
#: runs in the driver, not per row (Janino compiling the generated stages, Catalyst's analyser
#: and optimiser, Java serialisation of tasks, py4j, Parquet footers).  It gets warm enough in
#: a 10M-event analysis for C2 to spend ~15 CPU-seconds compiling it, which it never earns
#: back; it stays with C1.  Measured on a 10,434,991-event history, four interleaved pairs:
#: JIT compile time 71-83 -> 55-58 s, JVM CPU 179 -> 166 s, wall 95.9 -> 91.7 s (means).
DRIVER_SIDE_CLASSES = (
    "org/codehaus/*",
    "java/io/ObjectInputStream*",
    "java/io/ObjectOutputStream*",
    "java/io/ObjectStreamClass*",
    "py4j/*",
    "net/razorvine/*",
    "scala/runtime/LambdaDeserializer*",
    "scala/reflect/*",
    "jdk/internal/loader/*",
    "org/apache/spark/sql/catalyst/analysis/*",
    "org/apache/spark/sql/catalyst/optimizer/*",
    "org/apache/spark/sql/catalyst/trees/*",
    "org/apache/spark/sql/catalyst/parser/*",
    "org/apache/spark/sql/catalyst/rules/*",
    "org/antlr/*",
    "org/apache/parquet/format/*",
    "shaded/parquet/org/apache/thrift/*",
    "org/apache/xbean/*",
    "org/json4s/*",
    "com/fasterxml/*",
)
#: the local JVM's garbage collector: the throughput collector, not the default G1.  An analysis
#: is a batch job whose cached projections sit on the heap; G1's concurrent marking kept scanning
#: them and its write barriers slow every task.  Measured on a 10,434,991-event history (with
#: serialized projections, see projections.Projections._keep): JVM CPU 197 -> 167 s, wall 108 ->
#: 94 s; on a 1,490,713-event one, with serialized projections too: 74 -> 64 CPU-s (two pairs)
GC_OPTIONS = ("-XX:+UseParallelGC",)
#: history rows per shuffle partition (local runs), and the bounds: below ``MIN_PARALLEL_ROWS``
#: one partition (a task per stage costs more than the work); above it at least one per core.
#: With one task per core, Parquet scans and shuffles both in as many tasks as cores (local
#: sessions' default parallelism is their core count), a 10,434,991-event history on 2 cores
#: ran 65.4-76.2 s (118.8-137.5 JVM CPU-s) against 68.1-77.3 s (122.6-137.7) with 4 of each:
#: five alternating pairs, each won by fewer tasks, by 2.7 s on average
ROWS_PER_PARTITION = 6_000_000
MIN_PARALLEL_ROWS = 200_000
MAX_LOCAL_PARTITIONS = 8
#: off-heap memory of a local session (``TXNCHAOS_SPARK_OFFHEAP`` overrides): Spark's own
#: memory (hash-aggregation maps, sort and shuffle buffers) lives outside the garbage-collected
#: heap, so young collections no longer copy its pages.  Allocated as used, not up front.  (The
#: kept projections stay in the heap: a local checkpoint's storage level drops the off-heap
#: flag.)  Measured on a 10,434,991-event history, three alternating pairs: GC threads
#: 9.0-13.1 -> 3.5-4.5 CPU-s
DEFAULT_OFF_HEAP = "3g"
#: heap of a local session's JVM (``TXNCHAOS_SPARK_MEMORY`` overrides)
DEFAULT_DRIVER_MEMORY = "4g"
#: rows of one window partition (a consumer's reads of one partition) a local session keeps
#: in an in-memory array before it moves them into a spillable sorter: Spark's default of
#: 4,096 sends every long stream through the sorter's copies (measured on a 10M-event history:
#: the stream's window stage 14.5 -> 10.7 CPU-s); beyond this many rows it still spills
WINDOW_ROWS_IN_MEMORY = 1_000_000


class SparkSettingsError(ValueError):
    """A ``TXNCHAOS_SPARK_*`` environment variable has a value Spark cannot use (the message
    names it)."""


def _is_local(master: str) -> bool:
    return master.startswith("local")


def local_cores(master: str) -> int:
    """Worker threads of a ``local``, ``local[N]``, ``local[*]`` or ``local[N,F]`` master."""
    inner = master[len("local[") : -1] if master.startswith("local[") else ""
    n = inner.split(",")[0]
    if n == "*":
        return os.cpu_count() or 1
    return int(n) if n.isdigit() and int(n) > 0 else 1


def _temp_file(stem: str, suffix: str, text: str) -> Path:
    """A file holding ``text`` in the temp dir, named by its content (written once, atomically:
    a configuration file the JVM reads, with no package data needed)."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    path = Path(tempfile.gettempdir()) / f"{stem}-{digest}{suffix}"
    if not path.exists():
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(path)
    return path


def _log4j_conf() -> Path:
    return _temp_file("txnchaos-log4j2", ".properties", LOG4J_PROPERTIES)


def _compiler_directives() -> Path:
    """The JVM compiler-directives file that keeps :data:`DRIVER_SIDE_CLASSES` out of C2."""
    directives = [{"match": [f"{c}.*" for c in DRIVER_SIDE_CLASSES], "c2": {"Exclude": True}}]
    return _temp_file("txnchaos-jit", ".json", json.dumps(directives, indent=1))


def jit_options(mode: str) -> list[str]:
    """JVM options for a JIT mode: C1 only (``quick``), or tiered with the driver-side
    classes kept out of C2 (``full``)."""
    if mode == "quick":
        return ["-XX:TieredStopAtLevel=1"]
    directives = _compiler_directives()
    return ["-XX:+UnlockDiagnosticVMOptions", f"-XX:CompilerDirectivesFile={directives}"]


def jit_mode(history_rows: int | None) -> str:
    """``quick`` (C1 only) or ``full`` (tiered, with C2) for a local JVM judging a history of
    ``history_rows`` (None: many small ones, as the test suite does); ``TXNCHAOS_SPARK_JIT``
    overrides."""
    forced = os.environ.get("TXNCHAOS_SPARK_JIT")
    if forced:
        if forced not in JIT_MODES:
            raise SparkSettingsError(f"TXNCHAOS_SPARK_JIT={forced!r}: expected one of {JIT_MODES}")
        return forced
    return "full" if history_rows is not None and history_rows > QUICK_JIT_ROWS else "quick"


def history_rows(run: RunDir) -> int | None:
    """Rows of the run's history.parquet (from its footer), or None if it has none yet."""
    if run.history_parquet is None:
        return None
    return int(pq.ParquetFile(run.history_parquet).metadata.num_rows)


def get_session(
    master: str | None = None,
    app_name: str = "txnchaos-analysis",
    history_rows: int | None = None,
) -> SparkSession:
    """Return the active session, or build one for ``master`` (default ``local[2]``); a local
    JVM's JIT is chosen for ``history_rows`` (see :func:`jit_mode`)."""
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
        .config("spark.sql.adaptive.enabled", "false")
        # an analysis plans ~150 distinct code-generated stages: keep them all compiled (the
        # default cache of 100 recompiles them in every task of every analysis)
        .config("spark.sql.codegen.cache.maxEntries", "2000")
        .config("spark.sql.autoBroadcastJoinThreshold", str(64 * 1024 * 1024))
        .config("spark.sql.parquet.enableVectorizedReader", "true")
        # joins on (a, b) may reuse a partitioning on b alone: no second shuffle of the side
        # that already has it
        .config("spark.sql.requireAllClusterKeysForCoPartition", "false")
        # cached projections are built once and read a few times: compressing them costs more
        # CPU than it saves
        .config("spark.sql.inMemoryColumnarStorage.compressed", "false")
        .config("spark.serializer", "org.apache.spark.serializer.KryoSerializer")
        # the kept projections are serialized row by row (projections.Projections._keep); rows
        # hold no shared or cyclic references, and tracking them cost Kryo a map clear per row
        # (measured on a 10,434,991-event history: JVM CPU 140.6 -> 131.7 s, 78.2 -> 73.9 s)
        .config("spark.kryo.referenceTracking", "false")
    )
    archive = None
    if _is_local(master):
        java_opts = [f"-Dlog4j2.configurationFile={_log4j_conf()}"]
        java_opts += jit_options(jit_mode(history_rows))
        java_opts += GC_OPTIONS
        archive = class_archive.plan()
        if archive is not None:
            java_opts += archive.java_options()
        cores = local_cores(master)
        # before the JVM starts: bind to loopback without the "resolves to a loopback
        # address" warning
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        b = (
            b.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.driver.extraJavaOptions", " ".join(java_opts))
            .config("spark.sql.shuffle.partitions", str(cores))
            .config("spark.default.parallelism", str(cores))
            .config("spark.driver.memory", driver_memory())
            # shuffles stay on this machine's disk (page cache): compressing them costs more
            # CPU than the bytes it saves
            .config("spark.shuffle.compress", "false")
            .config("spark.shuffle.spill.compress", "false")
            .config("spark.sql.windowExec.buffer.in.memory.threshold", str(WINDOW_ROWS_IN_MEMORY))
            .config("spark.memory.offHeap.enabled", "true")
            .config("spark.memory.offHeap.size", off_heap_size())
        )
    spark = b.getOrCreate()
    if _is_local(master):
        spark.sparkContext.setLogLevel("ERROR")
        class_archive.after_start(archive, spark.sparkContext._gateway)
    return spark


def off_heap_size() -> str:
    """A local session's off-heap memory: ``TXNCHAOS_SPARK_OFFHEAP`` (a size such as ``3g``,
    ``512m``) or :data:`DEFAULT_OFF_HEAP`."""
    return _size_setting("TXNCHAOS_SPARK_OFFHEAP", DEFAULT_OFF_HEAP)


def driver_memory() -> str:
    """A local session's heap: ``TXNCHAOS_SPARK_MEMORY`` (a size such as ``4g``) or
    :data:`DEFAULT_DRIVER_MEMORY`."""
    return _size_setting("TXNCHAOS_SPARK_MEMORY", DEFAULT_DRIVER_MEMORY)


def _size_setting(variable: str, default: str) -> str:
    size = os.environ.get(variable, default)
    if not re.fullmatch(r"[1-9][0-9]*[kmgt]?", size.lower()):
        raise SparkSettingsError(f"{variable}={size!r}: expected a size such as 3g or 512m")
    return size


def local_shuffle_partitions(rows: int, cores: int) -> int:
    """Shuffle partitions for a local session judging ``rows`` history rows on ``cores``: one
    per ``ROWS_PER_PARTITION`` rows, at least one per core once the work is worth splitting
    (``MIN_PARALLEL_ROWS``), at most ``MAX_LOCAL_PARTITIONS``; per-task overhead dominates
    small histories."""
    n = -(-rows // ROWS_PER_PARTITION)
    if rows >= MIN_PARALLEL_ROWS:
        n = max(n, cores)
    return max(1, min(MAX_LOCAL_PARTITIONS, n))


def tune_session(spark: SparkSession, rows: int | None) -> None:
    """Local sessions: shuffle partitions by the history's ``rows`` (:func:`history_rows`;
    None leaves them as they are), see :func:`local_shuffle_partitions`."""
    master = str(spark.sparkContext.master)
    if not _is_local(master) or rows is None:
        return
    n = local_shuffle_partitions(rows, local_cores(master))
    spark.conf.set("spark.sql.shuffle.partitions", str(n))
