"""The class-data-sharing archive of local Spark JVMs: built in the background after the first
analysis (which exits without waiting for it), checked before it gets its final name, mapped by
the next (real JVMs, real Spark)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from txnchaos.analysis.spark import class_archive
from txnchaos.analysis.spark.class_archive import install, plan

from .helpers import build


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cds"
    monkeypatch.setenv(class_archive.ENV_DIR, str(d))
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)
    return d


def test_a_session_maps_the_archive_once_one_exists_and_only_a_build_writes_it(
    archive_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = plan()
    assert first is not None and not first.use and not first.dump
    assert first.java_options() == []  # an analysis never pays for writing the archive
    monkeypatch.setattr(class_archive, "_dumping", True)  # what build() sets
    building = plan()
    assert building is not None and building.dump
    assert building.java_options()[0] == f"-XX:ArchiveClassesAtExit={building.temp}"
    assert building.temp.parent == building.final.parent == archive_dir
    assert str(os.getpid()) in building.temp.name  # private to this process
    building.final.write_bytes(b"x")
    second = plan()
    assert second is not None and second.use and second.final == first.final
    assert second.java_options() == [f"-XX:SharedArchiveFile={first.final}"]


def test_the_archive_can_be_switched_off(
    archive_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(class_archive.ENV_SWITCH, "0")
    assert plan() is None


def _java() -> Path:
    java = class_archive.java_binary()
    assert java is not None, "no java on this machine"
    return java


def test_an_unusable_archive_is_never_installed(tmp_path: Path) -> None:
    """A truncated archive would crash the JVM that maps it: it is checked and thrown away."""
    temp, final = tmp_path / "a.jsa.1.tmp", tmp_path / "a.jsa"
    temp.write_bytes(b"\0" * 4096)
    assert not install(temp, final, _java(), str(tmp_path))
    assert not temp.exists() and not final.exists()


def test_a_usable_archive_is_installed_and_others_pruned(tmp_path: Path) -> None:
    java = _java()
    name = f"{class_archive.PREFIX}new{class_archive.SUFFIX}"
    temp, final = tmp_path / f"{name}.{os.getpid()}.tmp", tmp_path / name
    dumped = subprocess.run(
        [str(java), f"-XX:ArchiveClassesAtExit={temp}", "-cp", str(tmp_path), "-version"],
        capture_output=True,
    )
    assert dumped.returncode == 0 and temp.is_file(), dumped.stderr.decode()
    old = tmp_path / f"{class_archive.PREFIX}old{class_archive.SUFFIX}"
    abandoned = tmp_path / f"{name}.999999999.tmp"  # no such process
    writing = tmp_path / f"{class_archive.PREFIX}x{class_archive.SUFFIX}.{os.getppid()}.tmp"
    for p in (old, abandoned, writing):
        p.write_bytes(b"x")
    assert install(temp, final, java, str(tmp_path))
    assert final.is_file() and not temp.exists()
    assert not old.exists() and not abandoned.exists()
    assert writing.exists()  # another live process may still be writing it


ANALYZE = """
import sys
from txnchaos.analysis.spark.pipeline import analyze
analyze(sys.argv[1], write=False)
"""


def _analyze(run: Path, env: dict[str, str]) -> str:
    r = subprocess.run(
        [sys.executable, "-c", ANALYZE, str(run)], env=env, capture_output=True, timeout=600
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return r.stderr.decode(errors="replace")


def _wait_for_build(archive: Path) -> None:
    """Until the background build has installed ``archive`` and released its lock."""
    lock = archive.with_name(archive.name + ".build")
    for _ in range(6000):  # a bound, not a timing assertion: the build ends or fails first
        if archive.exists() and not lock.exists():
            return
        time.sleep(0.1)
    raise AssertionError(f"no archive at {archive} (build lock there: {lock.exists()})")


@pytest.mark.nightly  # minutes on two cores: an analysis, then a build judging a sample
def test_the_first_analysis_exits_at_once_and_a_background_build_installs_the_archive(
    tmp_path: Path,
) -> None:
    run = tmp_path / "run"
    build(seed=3).write(run)
    cds = tmp_path / "cds"
    env = {k: v for k, v in os.environ.items() if k != class_archive.ENV_SWITCH}
    env[class_archive.ENV_DIR] = str(cds)
    env.pop("JAVA_TOOL_OPTIONS", None)
    said = _analyze(run, env)  # returns once the analysis process (not the build) exited
    assert "building an archive of Spark's classes in the background" in said, said
    assert "Traceback" not in said and "[warning][cds]" not in said, said
    # the build starts at that exit and judges a sample in a JVM of its own: nothing yet
    assert not [p for p in cds.iterdir() if p.name.endswith(class_archive.SUFFIX)]
    p = planned_archive(cds)
    _wait_for_build(p)
    archives = sorted(x.name for x in cds.iterdir())
    assert archives == [p.name], archives  # installed, its temp file and lock gone

    log = tmp_path / "classes.log"
    said = _analyze(run, {**env, "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={log}"})
    assert "archive" not in said  # mapped: neither built again nor refused by the JVM
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    spark_context = [line for line in lines if " org.apache.spark.SparkContext " in line]
    assert spark_context and "shared objects file (top)" in spark_context[0], spark_context


def planned_archive(cds: Path) -> Path:
    """The archive a session plans in ``cds`` (its key: this java, these jars)."""
    java, jars = class_archive.java_binary(), class_archive.spark_jars()
    assert java is not None
    return (
        cds / f"{class_archive.PREFIX}{class_archive.archive_key(java, jars)}{class_archive.SUFFIX}"
    )


def test_a_sample_keeps_the_run_files_and_the_head_of_the_history(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build(seed=3).write(run)
    rows = pq.ParquetFile(run / "history.parquet").metadata.num_rows
    sample = class_archive.sample_run(run, tmp_path / "sample")
    assert {p.name for p in run.iterdir() if p.is_file()} == {p.name for p in sample.iterdir()}
    got = pq.read_table(sample / "history.parquet")
    assert got.num_rows == min(rows, class_archive.SAMPLE_ROWS)
    assert got.equals(pq.read_table(run / "history.parquet").slice(0, got.num_rows))


def test_one_build_at_a_time(tmp_path: Path) -> None:
    lock = tmp_path / "a.jsa.build"
    assert class_archive._take_lock(lock) and lock.read_text() == str(os.getpid())
    assert not class_archive._take_lock(lock)  # held by a live process
    lock.write_text("999999999")  # left by a process that is gone
    assert class_archive._take_lock(lock)


def test_the_mode_of_the_last_session_is_reported(tmp_path: Path) -> None:
    java, final = Path("/usr/bin/java"), tmp_path / "a.jsa"
    class_archive.after_start(None, object())
    assert class_archive.mode() == "off"
    class_archive.after_start(class_archive.Plan(java, final, use=True), object())
    assert class_archive.mode() == "mapped"
    class_archive.after_start(class_archive.Plan(java, final, use=False), object())
    assert class_archive.mode() == "missing"
    class_archive.after_start(class_archive.Plan(java, final, use=False, dump=True), object())
    assert class_archive.mode() == "writing"
    class_archive.after_start(None, object())


def test_archives_live_in_the_virtualenv_or_the_user_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv(class_archive.ENV_DIR, raising=False)
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "venv"))
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "python"))
    (tmp_path / "venv").mkdir()
    assert class_archive.archive_dir() == tmp_path / "venv" / "var" / "txnchaos"
    monkeypatch.setattr(sys, "base_prefix", str(tmp_path / "venv"))  # not a virtualenv
    assert class_archive.archive_dir() == Path.home() / ".cache" / "txnchaos"


def test_one_process_starts_one_build(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Several analyses in one process without an archive arrange one build at exit, from the
    last run directory; an analysis that mapped the archive, or is itself a build, none."""
    hooks: list[tuple[object, ...]] = []
    monkeypatch.setattr(class_archive.atexit, "register", lambda *a: hooks.append(a))
    monkeypatch.setattr(class_archive, "_build_from", [])
    java, final = Path("/usr/bin/java"), tmp_path / "a.jsa"
    try:
        class_archive.after_start(class_archive.Plan(java, final, use=True), object())
        assert not class_archive.build_later(tmp_path / "r0")
        class_archive.after_start(class_archive.Plan(java, final, use=False, dump=True), object())
        assert not class_archive.build_later(tmp_path / "r0")
        class_archive.after_start(class_archive.Plan(java, final, use=False), object())
        assert class_archive.build_later(tmp_path / "r1")
        assert class_archive.build_later(tmp_path / "r2")
        assert len(hooks) == 1 and class_archive._build_from == [(tmp_path / "r2").resolve()]
    finally:
        class_archive.after_start(None, object())
