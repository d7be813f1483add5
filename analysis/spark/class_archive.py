"""A class-data-sharing (CDS) archive of the classes a local Spark JVM loads.

A local JVM loads ~14,000 classes from ~280 jars at start-up; mapped from an archive
(``-XX:SharedArchiveFile``) they arrive parsed and verified, which shortens every local
analysis (figures: bench/README.md).  The archive is built in the background, never at the
user's expense:

1. A local session with no archive for its key runs without one; when the analysis ends,
   :func:`build_later` arranges that at Python's exit a detached process (own session, no
   inherited output) starts :func:`build`.
2. :func:`build` judges a small sample of the same run directory in a JVM started with
   ``-XX:ArchiveClassesAtExit=TMP``, lets that JVM exit, checks the archive with ``-Xshare:on``
   (a truncated archive would crash a JVM with SIGBUS rather than be ignored) and only then
   renames it to its final name.  A lock file keeps to one build at a time.
3. Later sessions with the same key start with ``-XX:SharedArchiveFile=FINAL``.

The key covers what an archive is only valid for: the ``java`` binary and Spark's jars (paths,
sizes, modification times).  Where archives live: :func:`archive_dir`.  ``TXNCHAOS_SPARK_CDS=0``
turns all of this off.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_SWITCH = "TXNCHAOS_SPARK_CDS"
ENV_DIR = "TXNCHAOS_SPARK_CDS_DIR"
PREFIX = "spark-classes-"
SUFFIX = ".jsa"
#: how long a build waits for its JVM to write the archive and exit
DUMP_TIMEOUT_S = 120.0
CHECK_TIMEOUT_S = 60.0


def enabled() -> bool:
    return os.environ.get(ENV_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


def archive_dir() -> Path:
    """``TXNCHAOS_SPARK_CDS_DIR``, else the virtualenv's ``var/txnchaos`` (deleted with it), else
    (no virtualenv, or not writable) ``~/.cache/txnchaos``."""
    forced = os.environ.get(ENV_DIR)
    if forced:
        return Path(forced)
    in_venv = sys.prefix != sys.base_prefix
    if in_venv and os.access(sys.prefix, os.W_OK):
        return Path(sys.prefix) / "var" / "txnchaos"
    return Path.home() / ".cache" / "txnchaos"


def java_binary() -> Path | None:
    """The ``java`` spark-submit runs: ``$JAVA_HOME/bin/java``, else the first on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not os.path.exists(found):
        return None
    return Path(os.path.realpath(found))


def spark_jars() -> Path:
    from pyspark.find_spark_home import _find_spark_home

    return Path(_find_spark_home()) / "jars"


def archive_key(java: Path, jars: Path) -> str:
    """A digest of what an archive is valid for: the java binary and every Spark jar."""
    h = hashlib.sha256()
    for p in [java, *sorted(jars.glob("*.jar"))]:
        st = p.stat()
        h.update(f"{p}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class Plan:
    """What a local session does about the archive: map ``final`` (``use``), write it at its
    JVM's exit (``dump``: the background build's session), or neither (no archive yet)."""

    java: Path
    final: Path
    use: bool
    dump: bool = False

    def java_options(self) -> list[str]:
        if self.use:
            return [f"-XX:SharedArchiveFile={self.final}"]
        if self.dump:
            # the dump warns of every class it skips (not linked, JFR events): errors only
            return [f"-XX:ArchiveClassesAtExit={self.temp}", "-Xlog:cds=error"]
        return []

    @property
    def temp(self) -> Path:
        return self.final.with_name(f"{self.final.name}.{os.getpid()}.tmp")

    @property
    def lock(self) -> Path:
        return self.final.with_name(f"{self.final.name}.build")


#: set by :func:`build`: this process's sessions write the archive at their JVM's exit
_dumping = False


def plan() -> Plan | None:
    """The archive plan for a local session about to start, or None (switched off, no java,
    no Spark jars, or no writable place for a new archive)."""
    if not enabled():
        return None
    java = java_binary()
    try:
        jars = spark_jars()
    except Exception:  # pyspark cannot find its home: the session will say so itself
        return None
    if java is None or not jars.is_dir():
        return None
    final = archive_dir() / f"{PREFIX}{archive_key(java, jars)}{SUFFIX}"
    if final.is_file():
        return Plan(java, final, use=True)
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(final.parent, os.W_OK):
        return None
    return Plan(java, final, use=False, dump=_dumping)


#: what the last local session of this process did about the archive (see :func:`mode`)
_last: Plan | None = None
#: the run directory whose sample the exit hook builds the archive from (one hook a process)
_build_from: list[Path] = []


def mode() -> str:
    """``mapped`` (the last local session mapped an archive), ``writing`` (it writes one at
    exit: a background build), ``missing`` (none yet: one is built after this process) or
    ``off``: for benchmarks, which should say which kind of start they timed."""
    if _last is None:
        return "off"
    if _last.use:
        return "mapped"
    return "writing" if _last.dump else "missing"


def after_start(p: Plan | None, gateway: Any) -> None:
    """Once a local JVM runs: remember its plan (:func:`mode`, :func:`build_later`)."""
    global _last
    _last = p


def build_later(run_dir: str | os.PathLike[str]) -> bool:
    """After an analysis of ``run_dir`` whose JVM found no archive: at Python's exit, start a
    detached :func:`build` from a sample of it (once per process).  True if one is arranged."""
    if _last is None or _last.use or _last.dump:
        return False
    if not _build_from:
        atexit.register(_start_build, _last)
    _build_from[:] = [Path(run_dir).resolve()]
    return True


def _start_build(p: Plan) -> None:
    """At Python's exit: start the background build, detached (its own session, no inherited
    output), so neither this exit nor a reader of this process's output waits for it."""
    if p.final.is_file() or _lock_held(p.lock) or not _build_from:
        return
    cmd = [sys.executable, "-m", __name__, str(_build_from[0])]
    try:
        subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )
    except OSError:
        return
    _say(
        f"building an archive of Spark's classes in the background for faster analyses "
        f"({p.final}; {ENV_SWITCH}=0 turns this off)"
    )


#: history rows of the sample a background build judges (enough to run every checker's code)
SAMPLE_ROWS = 20_000


def sample_run(run_dir: Path, into: Path) -> Path:
    """A copy of ``run_dir``'s top-level files with at most :data:`SAMPLE_ROWS` history rows."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    into.mkdir(parents=True, exist_ok=True)
    for f in run_dir.iterdir():
        if f.is_file() and f.name != "history.parquet":
            shutil.copy2(f, into / f.name)
    history = run_dir / "history.parquet"
    if history.is_file():
        pf = pq.ParquetFile(history)
        head = next(pf.iter_batches(batch_size=SAMPLE_ROWS), None)
        table = pa.Table.from_batches([head] if head is not None else [], schema=pf.schema_arrow)
        pq.write_table(table, into / "history.parquet")
    else:
        hist = run_dir / "history"
        if hist.is_dir():
            shutil.copytree(hist, into / "history")
    return into


def build(run_dir: Path) -> bool:
    """Write, check and install the archive by judging a sample of ``run_dir`` in a JVM that
    dumps its classes at exit; False if another build holds the lock or anything fails."""
    global _dumping
    import tempfile

    _dumping = True
    p = plan()
    if p is None or p.use or not _take_lock(p.lock):
        return False
    try:
        from .pipeline import analyze

        with tempfile.TemporaryDirectory(prefix="txnchaos-cds-") as tmp:
            sample = sample_run(run_dir, Path(tmp) / "run")
            analyze(sample, write=False)
            from pyspark import SparkContext

            proc = getattr(SparkContext._gateway, "proc", None)
            cp = jvm_class_path(proc.pid) if proc is not None else None
            end_jvm(proc, DUMP_TIMEOUT_S)
            return cp is not None and install(p.temp, p.final, p.java, cp)
    finally:
        p.temp.unlink(missing_ok=True)
        p.lock.unlink(missing_ok=True)


def _take_lock(lock: Path) -> bool:
    """Create ``lock`` holding this pid; a lock left by a dead process is taken over."""
    for _ in range(2):
        try:
            fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
        except FileExistsError:
            if _lock_held(lock):
                return False
            lock.unlink(missing_ok=True)
            continue
        with os.fdopen(fd, "w") as f:
            f.write(str(os.getpid()))
        return True
    return False


def _lock_held(lock: Path) -> bool:
    """Whether ``lock`` exists and names a live process."""
    try:
        pid = int(lock.read_text().strip() or "0")
    except (OSError, ValueError):
        return False
    return pid > 0 and _alive(pid)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def jvm_class_path(pid: int) -> str | None:
    """The ``-cp`` of a running JVM, from its command line (None if it cannot be read)."""
    try:
        args = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return None
    for flag, value in itertools.pairwise(args):
        if flag in (b"-cp", b"-classpath", b"--class-path"):
            return value.decode()
    return None


def end_jvm(proc: subprocess.Popen[bytes] | None, timeout_s: float) -> None:
    """Stop this process's SparkContext, then end its JVM (``proc``, the gateway's process;
    None when this process did not start it): with its stdin closed it exits, running its
    shutdown hooks (writing the archive when asked to), and this waits for that."""
    _stop_spark()
    if proc is not None and proc.poll() is None:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=timeout_s)


def _stop_spark() -> None:
    """Stop this process's SparkContext first: stopped by the JVM's shutdown hook instead, it
    would still call Python's accumulator server, which is closing, and print a traceback."""
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is not None:
        sc.stop()


def _say(what: str) -> None:
    print(f"txnchaos: {what}", file=sys.stderr, flush=True)


def usable(archive: Path, java: Path, class_path: str) -> bool:
    """Whether ``java`` with ``class_path`` maps ``archive`` (``-Xshare:on`` fails otherwise)."""
    try:
        r = subprocess.run(
            [
                str(java),
                "-Xshare:on",
                f"-XX:SharedArchiveFile={archive}",
                "-cp",
                class_path,
                "-version",
            ],
            capture_output=True,
            timeout=CHECK_TIMEOUT_S,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return r.returncode == 0


def install(temp: Path, final: Path, java: Path, class_path: str) -> bool:
    """Rename a freshly written archive to its final name if ``java`` can use it, and delete
    the archives of other keys and abandoned temporary files; the temp file is gone after."""
    try:
        if not temp.is_file() or temp.stat().st_size == 0 or not usable(temp, java, class_path):
            return False
        temp.replace(final)
    finally:
        temp.unlink(missing_ok=True)
    _prune(final)
    return True


def _prune(keep: Path) -> None:
    for other in keep.parent.glob(f"{PREFIX}*"):
        if other == keep:
            continue
        if other.name.endswith(".tmp") and _pid_alive(other):
            continue
        if other.name.endswith(".build") and _lock_held(other):
            continue
        other.unlink(missing_ok=True)


def _pid_alive(temp: Path) -> bool:
    """Whether the process that named ``...jsa.<pid>.tmp`` still runs."""
    try:
        pid = int(temp.name.rsplit(".", 2)[-2])
        os.kill(pid, 0)
    except (ValueError, IndexError, ProcessLookupError):
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":  # the background build: python -m ... RUN_DIR
    # the package's own module, not this __main__ copy: the session reads its ``_dumping``
    from . import class_archive as _module

    sys.exit(0 if _module.build(Path(sys.argv[1])) else 1)
