"""Compiles the Java client program (``src/``) once per version of its sources.

The classes go to ``CACHE/java-client/<digest>/classes`` (``CACHE`` as in
:mod:`txnchaos.harness.maven`), where ``<digest>`` hashes the sources and the kafka-clients
release compiled against: a checkout whose sources did not change finds them there and
compiles nothing. The program is compiled against the oldest client it supports
(:data:`COMPILE_AGAINST`, resolved like any release by :mod:`~txnchaos.harness.maven`) and
runs on any later 4.x one: what later releases add is reached by reflection.

``python -m txnchaos.harness.workload.java_client.build`` (run by ``scripts/bootstrap.sh``)
builds it and prints where.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from ...maven import MavenError, cache_root, classpath
from .versions import COMPILE_AGAINST, client_lib

SOURCES = Path(__file__).parent / "src"
MAIN_CLASS = "txnchaos.javaclient.Driver"


class JavaBuildError(RuntimeError):
    """The program could not be compiled (no JDK, no kafka-clients, a compile error)."""


def source_files() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def digest() -> str:
    h = hashlib.sha256(f"kafka-clients {COMPILE_AGAINST}\n".encode())
    for f in source_files():
        h.update(str(f.relative_to(SOURCES)).encode() + b"\0")
        h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def classes_dir() -> Path:
    return cache_root() / "java-client" / digest() / "classes"


def ensure_built(progress: Callable[[str], None] | None = None) -> Path:
    """The compiled classes' directory, compiling them first if these sources never were."""
    out = classes_dir()
    if (out / "complete").exists():
        return out
    javac = shutil.which("javac")
    if javac is None:
        raise JavaBuildError(
            "javac is not installed: the Java client workload kinds need a JDK "
            "(on Debian: apt-get install openjdk-17-jdk-headless)"
        )
    try:
        lib = client_lib(COMPILE_AGAINST, progress)
    except MavenError as e:
        raise JavaBuildError(f"kafka-clients {COMPILE_AGAINST} to compile against: {e}") from e
    out.parent.mkdir(parents=True, exist_ok=True)
    with (out.parent / ".lock").open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / "complete").exists():  # another process built it while we waited
            return out
        scratch = Path(tempfile.mkdtemp(prefix=".classes.", dir=out.parent))
        try:
            cmd = [javac, "-Xlint:all", "-Werror", "--release", "17", "-d", str(scratch)]
            cmd += ["-cp", classpath(lib), *map(str, source_files())]
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                raise JavaBuildError(f"javac failed:\n{proc.stderr[-4000:]}")
            (scratch / "complete").write_text(digest() + "\n")
            if out.exists():
                shutil.rmtree(out)
            scratch.rename(out)
        finally:
            if scratch.exists():
                shutil.rmtree(scratch, ignore_errors=True)
    if progress is not None:
        progress(f"compiled the Java client program into {out}")
    return out


def main() -> int:
    try:
        out = ensure_built(lambda line: print(line, file=sys.stderr))
    except JavaBuildError as e:
        print(f"java client: {e}", file=sys.stderr)
        return 1
    print(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
