"""The local Spark JVM's settings chosen from a run's size (no Spark started)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from txnchaos.analysis.spark.local_jvm import (
    DEFAULT_OFF_HEAP,
    DRIVER_SIDE_CLASSES,
    QUICK_JIT_ROWS,
    jit_mode,
    jit_options,
    local_cores,
    local_shuffle_partitions,
    off_heap_size,
    shuffle_partitions,
)
from txnchaos.analysis.spark.session import COMMON_CONF, session_conf


def test_short_jobs_use_the_quick_jit_and_long_ones_the_optimising_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TXNCHAOS_SPARK_JIT", raising=False)
    assert jit_mode(None) == "quick"  # many small histories (the test suite's shared session)
    assert jit_mode(1_000) == "quick"
    assert jit_mode(QUICK_JIT_ROWS) == "quick"
    assert jit_mode(QUICK_JIT_ROWS + 1) == "full"


def test_the_jit_can_be_forced_and_a_bad_value_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TXNCHAOS_SPARK_JIT", "full")
    assert jit_mode(10) == "full"
    monkeypatch.setenv("TXNCHAOS_SPARK_JIT", "fast")
    with pytest.raises(ValueError, match="TXNCHAOS_SPARK_JIT='fast'"):
        jit_mode(10)


def test_off_heap_size_can_be_set_and_a_bad_value_is_named(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TXNCHAOS_SPARK_OFFHEAP", raising=False)
    assert off_heap_size() == DEFAULT_OFF_HEAP
    monkeypatch.setenv("TXNCHAOS_SPARK_OFFHEAP", "512m")
    assert off_heap_size() == "512m"
    for bad in ("lots", "0", "3 g", "-1g"):
        monkeypatch.setenv("TXNCHAOS_SPARK_OFFHEAP", bad)
        with pytest.raises(ValueError, match="TXNCHAOS_SPARK_OFFHEAP="):
            off_heap_size()


@pytest.mark.parametrize(
    ("master", "cores"),
    [("local", 1), ("local[2]", 2), ("local[3,2]", 3), ("local[x]", 1)],
)
def test_local_cores(master: str, cores: int) -> None:
    assert local_cores(master) == cores


def test_quick_jit_is_c1_only_with_the_tiered_code_cache() -> None:
    """C1 alone gets a 48 MB code cache by default, which a long-lived session fills (the
    JVM then stops compiling): the quick JIT asks for the tiered default's 240 MB."""
    assert jit_options("quick") == ["-XX:TieredStopAtLevel=1", "-XX:ReservedCodeCacheSize=240m"]


def _directives_file(options: list[str]) -> Path:
    flag = "-XX:CompilerDirectivesFile="
    (path,) = (o[len(flag) :] for o in options if o.startswith(flag))
    return Path(path)


def test_full_jit_keeps_driver_side_classes_out_of_c2() -> None:
    options = jit_options("full")
    assert "-XX:+UnlockDiagnosticVMOptions" in options
    directives = json.loads(_directives_file(options).read_text(encoding="utf-8"))
    assert directives == [
        {"match": [f"{c}.*" for c in DRIVER_SIDE_CLASSES], "c2": {"Exclude": True}}
    ]
    assert "org/codehaus/*.*" in directives[0]["match"]  # Janino, the stage compiler
    # the per-row code stays with C2: no generated stage, no Spark execution class
    assert not any("catalyst/expressions" in c or "execution" in c for c in DRIVER_SIDE_CLASSES)
    assert jit_options("full") == options  # the same file for every session


def test_the_jvm_accepts_the_directives() -> None:
    options = jit_options("full")
    java = shutil.which("java")
    assert java is not None, "java is missing: the test command (scripts/test.sh) installs it"
    out = subprocess.run(
        [java, *options, "-XX:+CompilerDirectivesPrint", "-version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    text = out.stdout + out.stderr
    assert "1 compiler directives added" in text
    assert "Exclude:true" in text and "org/codehaus/*.*" in text


@pytest.mark.parametrize(
    ("rows", "cores", "partitions"),
    [
        (1_000, 2, 1),  # a task per stage costs more than the work
        (1_490_713, 2, 2),  # one per core once worth splitting
        (10_434_991, 2, 2),  # not 4 or 5: fewer, larger tasks on 2 cores (measured)
        (20_000_000, 2, 4),
        (10_434_991, 16, 8),  # never more than MAX_LOCAL_PARTITIONS
        (10**9, 2, 8),
    ],
)
def test_local_shuffle_partitions(rows: int, cores: int, partitions: int) -> None:
    assert local_shuffle_partitions(rows, cores) == partitions


LOCAL_ONLY = (
    "spark.driver.host",
    "spark.driver.bindAddress",
    "spark.driver.extraJavaOptions",
    "spark.driver.memory",
    "spark.memory.offHeap.enabled",
    "spark.memory.offHeap.size",
    "spark.sql.shuffle.partitions",
    "spark.default.parallelism",
    "spark.shuffle.compress",
    "spark.sql.windowExec.buffer.in.memory.threshold",
)


@pytest.mark.parametrize("master", ["spark://10.1.2.3:7077", "yarn", "k8s://https://h:443"])
def test_a_remote_master_gets_no_local_jvm_tuning(master: str) -> None:
    """JIT, GC, heap, off-heap, loopback binding and partitions assume one machine: a cluster
    keeps its own (and the class archive's options, even when given, are not applied)."""
    conf = session_conf(master, 10_434_991, ["-XX:SharedArchiveFile=/x.jsa"])
    assert conf == COMMON_CONF
    assert not set(LOCAL_ONLY) & set(conf)
    assert "SharedArchiveFile" not in " ".join(conf.values())


def test_a_local_master_gets_the_local_jvm_tuning(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TXNCHAOS_SPARK_JIT", raising=False)
    monkeypatch.delenv("TXNCHAOS_SPARK_OFFHEAP", raising=False)
    conf = session_conf("local[2]", 1_000, ["-XX:SharedArchiveFile=/x.jsa"])
    assert set(LOCAL_ONLY) <= set(conf)
    java = conf["spark.driver.extraJavaOptions"].split()
    assert "-XX:+UseParallelGC" in java and "-XX:TieredStopAtLevel=1" in java
    assert java[-1] == "-XX:SharedArchiveFile=/x.jsa"
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert conf["spark.sql.shuffle.partitions"] == "2"
    assert conf["spark.memory.offHeap.size"] == DEFAULT_OFF_HEAP
    assert {k: conf[k] for k in COMMON_CONF} == COMMON_CONF


def test_local_cluster_is_a_cluster() -> None:
    """``local-cluster[...]`` starts executor JVMs of its own: no local tuning for it."""
    assert session_conf("local-cluster[2,1,1024]", 1_000) == COMMON_CONF
    assert session_conf("local", 1_000) != COMMON_CONF


@pytest.mark.parametrize(
    ("rows", "cores", "partitions"),
    [(1_000, 16, 1), (1_490_713, 16, 16), (10**9, 16, 167)],
)
def test_cluster_shuffle_partitions_have_no_local_cap(
    rows: int, cores: int, partitions: int
) -> None:
    assert shuffle_partitions(rows, cores) == partitions
