"""A class-data-sharing (CDS) archive of the classes a local Spark JVM loads.

A local analysis JVM loads ~14,000 classes (Spark, Scala, Hadoop, Parquet) from ~280 jars:
finding each one among the jars, parsing and verifying it is seconds of CPU at start-up and
again whenever a job touches code not used before.  The JVM can instead map classes from an
archive written by an earlier run (``-XX:SharedArchiveFile``): they arrive parsed and verified.
Measured on this project's 2-core machines: a 20,000-event analysis 20.0-21.9 -> 15.7-15.8 s
(Spark start 3.8-4.1 -> 2.0-2.2 s); a 10,434,991-event one 73.9 -> 68.6 s.

How the archive comes to be, without ever handing the JVM a partial file (a truncated archive
crashes the JVM with SIGBUS rather than being ignored):

1. A local session with no archive yet starts its JVM with ``-XX:ArchiveClassesAtExit=TMP``,
   ``TMP`` a name private to this Python process.
2. When Python exits, :func:`_finish` closes the JVM's stdin (PySpark's gateway exits on EOF),
   waits for the JVM to write the archive and exit, checks the archive by starting the same
   ``java`` with the same class path and ``-Xshare:on`` (which refuses an unusable archive),
   and only then renames it to its final name.  Archives of other keys are deleted then.
3. Later sessions with the same key start with ``-XX:SharedArchiveFile=FINAL``.

The key covers what an archive is only valid for: the ``java`` binary and Spark's jars (paths,
sizes, modification times).  Where archives live: :func:`archive_dir`.
``TXNCHAOS_SPARK_CDS=0`` turns all of this off.
"""

from __future__ import annotations

import atexit
import hashlib
import itertools
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ENV_SWITCH = "TXNCHAOS_SPARK_CDS"
ENV_DIR = "TXNCHAOS_SPARK_CDS_DIR"
PREFIX = "spark-classes-"
SUFFIX = ".jsa"
#: how long Python waits at exit for the JVM to write a new archive (it takes a few seconds)
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
    """What a local session does about the archive: use ``final`` if ``use``, else write it."""

    java: Path
    final: Path
    use: bool

    def java_options(self) -> list[str]:
        if self.use:
            return [f"-XX:SharedArchiveFile={self.final}"]
        # the dump warns of every class it skips (not linked, JFR events): errors only
        return [f"-XX:ArchiveClassesAtExit={self.temp}", "-Xlog:cds=error"]

    @property
    def temp(self) -> Path:
        return self.final.with_name(f"{self.final.name}.{os.getpid()}.tmp")


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
    return Plan(java, final, use=False)


#: what the last local session of this process did about the archive (see :func:`mode`)
_last: Plan | None = None
#: JVMs (by pid) whose exit already has a :func:`_finish`: a session started again on the same
#: gateway after ``stop()`` runs in the same JVM, which writes one archive
_finishing: set[int] = set()


def mode() -> str:
    """``mapped`` (the last local session mapped an archive), ``writing`` (it writes one at
    exit) or ``off``: for benchmarks, which should say which kind of start they timed."""
    if _last is None:
        return "off"
    return "mapped" if _last.use else "writing"


def after_start(p: Plan | None, gateway: Any) -> None:
    """Once the JVM runs: for a plan that writes the archive, arrange :func:`_finish` at exit."""
    global _last
    _last = p
    if p is None or p.use:
        return
    proc = getattr(gateway, "proc", None)
    if proc is None or proc.stdin is None or proc.pid in _finishing:
        return
    cp = jvm_class_path(proc.pid)
    if cp is None:
        return
    _finishing.add(proc.pid)
    atexit.register(_finish, p, proc, cp)


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


def _finish(p: Plan, proc: subprocess.Popen[bytes], class_path: str) -> None:
    """At Python exit: let the JVM exit and write the archive, then install it if usable (and
    say so on stderr: the exit takes seconds longer, once)."""
    t = time.monotonic()
    _say(
        f"writing an archive of Spark's classes for faster analyses, once ({p.final}; "
        f"{ENV_SWITCH}=0 turns this off)"
    )
    installed = False
    try:
        end_jvm(proc, DUMP_TIMEOUT_S)
        installed = install(p.temp, p.final, p.java, class_path)
    except (OSError, subprocess.SubprocessError):
        pass
    finally:
        p.temp.unlink(missing_ok=True)
    took = time.monotonic() - t
    _say(f"class archive written in {took:.1f} s" if installed else "no usable class archive")


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
