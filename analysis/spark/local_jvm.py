"""Tuning of a local Spark JVM (``local[N]`` masters only): JIT, garbage collector, memory,
logging and shuffle partitions.  A remote master keeps Spark's defaults: these settings assume
one machine whose cores all run the analysis.  Measurements behind the figures: bench/README.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from pathlib import Path

#: log4j2 configuration of local sessions: errors only, on stderr (a failed task fails its job,
#: whose exception reaches Python, so task-level logging is silenced)
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
#: histories up to this many rows use the quick JIT tier only (C1): C2's compile time is not
#: earned back by a short job
QUICK_JIT_ROWS = 4_000_000
JIT_MODES = ("quick", "full")
#: classes a long (``full`` JIT) analysis keeps out of C2: code run in the driver, not per row,
#: that C2 would spend seconds compiling and never earn back
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
#: the throughput collector, not G1: a batch job whose kept projections G1 would keep scanning
GC_OPTIONS = ("-XX:+UseParallelGC",)
#: history rows per shuffle partition, and the bounds (a task per stage costs more than small
#: work; above ``MIN_PARALLEL_ROWS`` at least one per core)
ROWS_PER_PARTITION = 6_000_000
MIN_PARALLEL_ROWS = 200_000
MAX_LOCAL_PARTITIONS = 8
#: Spark's own memory off the heap, so young collections do not copy its pages
#: (``TXNCHAOS_SPARK_OFFHEAP`` overrides)
DEFAULT_OFF_HEAP = "3g"
#: heap of a local session's JVM (``TXNCHAOS_SPARK_MEMORY`` overrides)
DEFAULT_DRIVER_MEMORY = "4g"
#: rows of one window partition kept in memory before Spark's spillable sorter takes over
#: (the default 4,096 sends every long consumer stream through the sorter's copies)
WINDOW_ROWS_IN_MEMORY = 1_000_000


class SparkSettingsError(ValueError):
    """A ``TXNCHAOS_SPARK_*`` environment variable has a value Spark cannot use (the message
    names it)."""


def is_local(master: str) -> bool:
    """Whether ``master`` runs the whole analysis in this process's JVM (``local``,
    ``local[N]``, ...); ``local-cluster[...]`` starts executor JVMs of its own, like a cluster."""
    return master == "local" or master.startswith("local[")


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


def log4j_conf() -> Path:
    return _temp_file("txnchaos-log4j2", ".properties", LOG4J_PROPERTIES)


def _compiler_directives() -> Path:
    """The JVM compiler-directives file that keeps :data:`DRIVER_SIDE_CLASSES` out of C2."""
    directives = [{"match": [f"{c}.*" for c in DRIVER_SIDE_CLASSES], "c2": {"Exclude": True}}]
    return _temp_file("txnchaos-jit", ".json", json.dumps(directives, indent=1))


#: the code cache of a C1-only JVM (its default, 48 MB, fills in a long-lived session)
QUICK_CODE_CACHE = "240m"


def jit_options(mode: str) -> list[str]:
    """JVM options for a JIT mode: C1 only (``quick``), or tiered with the driver-side
    classes kept out of C2 (``full``)."""
    if mode == "quick":
        # C1 alone gets a 48 MB code cache; a session that judges run after run (a nightly, a
        # repro, the test suite's) filled it after ~20 minutes, and the JVM then stopped
        # compiling for good ("CodeCache is full. Compiler has been disabled"): the tiered
        # default's size
        return ["-XX:TieredStopAtLevel=1", f"-XX:ReservedCodeCacheSize={QUICK_CODE_CACHE}"]
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


def shuffle_partitions(rows: int, cores: int) -> int:
    """Shuffle partitions for ``rows`` history rows on ``cores`` executor cores: one per
    ``ROWS_PER_PARTITION`` rows, at least one per core once the work is worth splitting
    (``MIN_PARALLEL_ROWS``)."""
    n = -(-rows // ROWS_PER_PARTITION)
    if rows >= MIN_PARALLEL_ROWS:
        n = max(n, cores)
    return max(1, n)


def local_shuffle_partitions(rows: int, cores: int) -> int:
    """:func:`shuffle_partitions` for a local session, at most ``MAX_LOCAL_PARTITIONS``."""
    return min(MAX_LOCAL_PARTITIONS, shuffle_partitions(rows, cores))


def local_java_options(history_rows: int | None) -> list[str]:
    """The local JVM's options besides the class archive's: logging, JIT, garbage collector."""
    return [
        f"-Dlog4j2.configurationFile={log4j_conf()}",
        *jit_options(jit_mode(history_rows)),
        *GC_OPTIONS,
    ]


def local_conf(master: str, java_options: list[str]) -> dict[str, str]:
    """Spark settings of a local session on ``master`` whose JVM gets ``java_options``."""
    cores = str(local_cores(master))
    return {
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.extraJavaOptions": " ".join(java_options),
        "spark.sql.shuffle.partitions": cores,
        "spark.default.parallelism": cores,
        "spark.driver.memory": driver_memory(),
        # shuffles stay in this machine's page cache: compressing them costs more than it saves
        "spark.shuffle.compress": "false",
        "spark.shuffle.spill.compress": "false",
        "spark.sql.windowExec.buffer.in.memory.threshold": str(WINDOW_ROWS_IN_MEMORY),
        "spark.memory.offHeap.enabled": "true",
        "spark.memory.offHeap.size": off_heap_size(),
    }
