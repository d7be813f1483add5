"""The class-data-sharing archive of local Spark JVMs: written by one analysis process at its
exit, checked before it gets its final name, mapped by the next (real JVMs, real Spark)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from txnchaos.analysis import class_archive
from txnchaos.analysis.class_archive import install, plan

from .helpers import build


@pytest.fixture
def archive_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    d = tmp_path / "cds"
    monkeypatch.setenv(class_archive.ENV_DIR, str(d))
    monkeypatch.delenv(class_archive.ENV_SWITCH, raising=False)
    return d


def test_a_session_writes_the_archive_until_one_exists(archive_dir: Path) -> None:
    first = plan()
    assert first is not None and not first.use
    assert first.java_options()[0] == f"-XX:ArchiveClassesAtExit={first.temp}"
    assert first.temp.parent == first.final.parent == archive_dir
    assert str(os.getpid()) in first.temp.name  # private to this process
    first.final.write_bytes(b"x")
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
from txnchaos.analysis.pipeline import analyze
analyze(sys.argv[1], write=False)
"""


def _analyze(run: Path, env: dict[str, str]) -> str:
    r = subprocess.run(
        [sys.executable, "-c", ANALYZE, str(run)], env=env, capture_output=True, timeout=600
    )
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    return r.stderr.decode(errors="replace")


def test_one_analysis_writes_the_archive_and_the_next_maps_spark_from_it(tmp_path: Path) -> None:
    run = tmp_path / "run"
    build(seed=3).write(run)
    cds = tmp_path / "cds"
    env = {k: v for k, v in os.environ.items() if k != class_archive.ENV_SWITCH}
    env[class_archive.ENV_DIR] = str(cds)
    env.pop("JAVA_TOOL_OPTIONS", None)
    said = _analyze(run, env)
    archives = sorted(p.name for p in cds.iterdir())
    assert len(archives) == 1 and archives[0].endswith(class_archive.SUFFIX), archives
    assert "txnchaos: writing an archive of Spark's classes" in said
    assert "txnchaos: class archive written in" in said
    assert "Traceback" not in said and "[warning][cds]" not in said, said

    log = tmp_path / "classes.log"
    said = _analyze(run, {**env, "JAVA_TOOL_OPTIONS": f"-Xlog:class+load=info:file={log}"})
    assert "archive" not in said  # mapped: neither written again nor refused by the JVM
    lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    spark_context = [line for line in lines if " org.apache.spark.SparkContext " in line]
    assert spark_context and "shared objects file (top)" in spark_context[0], spark_context


def test_the_mode_of_the_last_session_is_reported(tmp_path: Path) -> None:
    java, final = Path("/usr/bin/java"), tmp_path / "a.jsa"
    class_archive.after_start(None, object())
    assert class_archive.mode() == "off"
    class_archive.after_start(class_archive.Plan(java, final, use=True), object())
    assert class_archive.mode() == "mapped"
    class_archive.after_start(class_archive.Plan(java, final, use=False), object())  # no proc
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


def test_one_jvm_gets_one_exit_hook(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session started again after stop() runs in the same JVM: its exit writes one archive,
    so it is finished (and announced) once."""
    hooks: list[tuple[object, ...]] = []
    monkeypatch.setattr(class_archive.atexit, "register", lambda *a: hooks.append(a))
    child = "import sys; print(1, flush=True); sys.stdin.read()"
    jvm = subprocess.Popen(
        [sys.executable, "-c", child, "-cp", str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    try:
        # once it prints, it runs its own command line (before, /proc may show the forked
        # parent's)
        assert jvm.stdout is not None and jvm.stdout.readline()

        class Gateway:
            proc = jvm

        p = class_archive.Plan(Path("/usr/bin/java"), tmp_path / "a.jsa", use=False)
        class_archive.after_start(p, Gateway())
        class_archive.after_start(p, Gateway())
        assert len(hooks) == 1 and hooks[0][3] == str(tmp_path)  # (_finish, plan, proc, cp)
    finally:
        assert jvm.stdin is not None
        jvm.stdin.close()
        jvm.wait(timeout=30)
        class_archive._finishing.discard(jvm.pid)
        class_archive.after_start(None, object())
