"""What keeps a long analysis cheap for the JVM's garbage collector: the local session runs
the parallel (throughput) collector, Spark's own memory is off the heap, and the shared
projections are kept serialized."""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import SparkSession

from txnchaos.analysis.load import prepare_run
from txnchaos.analysis.spark.load import load_run
from txnchaos.analysis.spark.local_jvm import DEFAULT_OFF_HEAP
from txnchaos.analysis.spark.projections import Projections
from txnchaos.analysis.spark.summary import summarize

from .helpers import build


def test_the_local_session_runs_the_parallel_collector(spark: SparkSession) -> None:
    jvm = spark._jvm
    assert jvm is not None
    beans = jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()
    assert {b.getName() for b in beans} == {"PS Scavenge", "PS MarkSweep"}


def test_projections_are_kept_serialized_and_released(spark: SparkSession, tmp_path: Path) -> None:
    build(seed=5).write(tmp_path)
    data = load_run(spark, prepare_run(tmp_path))
    proj = Projections(data, summarize(data.history))
    sc = spark.sparkContext
    before = set(dict(sc._jsc.getPersistentRDDs()).keys())
    assert proj.values.filter("n_reads > 0").count() > 0
    kept = {k: r for k, r in dict(sc._jsc.getPersistentRDDs()).items() if k not in before}
    assert kept, "no projection was materialised"
    for rdd in kept.values():
        level = rdd.getStorageLevel()
        assert not level.deserialized(), level.description()
        assert level.useMemory() and level.useDisk(), level.description()
    proj.release()
    assert not set(dict(sc._jsc.getPersistentRDDs()).keys()) - before


def test_the_local_session_has_off_heap_memory(spark: SparkSession) -> None:
    """Aggregation maps and sort and shuffle buffers are allocated off the heap."""
    assert spark.conf.get("spark.memory.offHeap.enabled") == "true"
    assert spark.conf.get("spark.memory.offHeap.size") == DEFAULT_OFF_HEAP


def test_kept_rows_are_serialized_without_reference_tracking(spark: SparkSession) -> None:
    """Kryo's reference tracking clears a map for every row of a kept projection; rows have
    no shared references, so sessions turn it off."""
    assert spark.conf.get("spark.kryo.referenceTracking") == "false"


def test_the_local_session_starts_with_one_task_per_core(spark: SparkSession) -> None:
    """Scans split into as many tasks as cores, and shuffles too until a history's size says
    otherwise (spark.local_shuffle_partitions)."""
    assert spark.sparkContext.defaultParallelism == 2
    assert spark.conf.get("spark.sql.shuffle.partitions") in {"1", "2"}
