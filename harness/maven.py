"""Maven Central artifacts in a per-version cache: Apache Kafka releases, their tools and
clients, ZooKeeper, the Prometheus JMX exporter, all fetched by name, never committed.

A *set* is a named list of Maven coordinates resolved together with their runtime
dependencies into one directory of jars::

    CACHE/maven/<set>/<version>/lib/*.jar     the jars (a java -cp DIR/lib/* classpath)
    CACHE/maven/<set>/<version>/pom.xml       the generated POM that resolved them
    CACHE/maven/<set>/<version>/complete      written last: the set is whole

``CACHE`` is ``$TXNCHAOS_CACHE_DIR``, else ``$XDG_CACHE_HOME/txnchaos``, else
``~/.cache/txnchaos``: shared by every checkout on the machine, so a release is fetched
once. The first resolution runs ``mvn dependency:copy-dependencies`` on a generated POM
(Maven's own repository, ``~/.m2``, keeps the downloads too) and prints progress; later
ones find ``complete`` and run no Maven at all (offline). Concurrent resolutions of the same
set (two test workers) wait on a lock file instead of fetching twice.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "Artifact",
    "MavenError",
    "cache_root",
    "classpath",
    "resolve",
]

_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.\-_+]*$")
_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9._\-]*$")
MVN_TIMEOUT_S = 900.0


class MavenError(RuntimeError):
    """An artifact could not be resolved (Maven missing, unknown version, no network)."""


@dataclass(frozen=True)
class Artifact:
    """``group:artifact:version`` (optionally ``:classifier``) to resolve with its runtime
    dependencies; ``exclusions`` are ``group:artifact`` pairs left out of its tree."""

    group: str
    artifact: str
    version: str
    classifier: str | None = None
    exclusions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not _VERSION_RE.match(self.version):
            raise MavenError(f"bad version {self.version!r} for {self.group}:{self.artifact}")

    def __str__(self) -> str:
        tail = f":{self.classifier}" if self.classifier else ""
        return f"{self.group}:{self.artifact}:{self.version}{tail}"

    def pom_dependency(self) -> str:
        classifier = f"<classifier>{self.classifier}</classifier>" if self.classifier else ""
        exclusions = ""
        if self.exclusions:
            items = "".join(
                "<exclusion><groupId>{}</groupId><artifactId>{}</artifactId></exclusion>".format(
                    *e.split(":", 1)
                )
                for e in self.exclusions
            )
            exclusions = f"<exclusions>{items}</exclusions>"
        return (
            f"<dependency><groupId>{self.group}</groupId><artifactId>{self.artifact}</artifactId>"
            f"<version>{self.version}</version>{classifier}{exclusions}</dependency>"
        )


def cache_root() -> Path:
    """Where fetched artifacts live (see the module docstring)."""
    explicit = os.environ.get("TXNCHAOS_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "txnchaos"


def set_dir(name: str, version: str) -> Path:
    if not _NAME_RE.match(name):
        raise MavenError(f"bad artifact set name {name!r}")
    if not _VERSION_RE.match(version):
        raise MavenError(f"bad version {version!r}")
    return cache_root() / "maven" / name / version


def classpath(lib: Path) -> str:
    """A ``java -cp`` value for every jar of a resolved set's ``lib`` directory."""
    return str(lib / "*")


def resolve(
    name: str,
    version: str,
    artifacts: Sequence[Artifact],
    *,
    progress: Callable[[str], None] | None = None,
    offline: bool | None = None,
) -> Path:
    """The ``lib`` directory holding ``artifacts`` and their runtime dependencies.

    ``name``/``version`` name the set in the cache. Fetches with Maven on first use
    (``progress`` gets one line per step; default: stderr), offline afterwards. With
    ``offline`` true (or ``TXNCHAOS_MAVEN_OFFLINE=1``) a set that is not cached yet is an
    error instead of a download.
    """
    if not artifacts:
        raise MavenError(f"artifact set {name} {version}: nothing to resolve")
    say = progress or _stderr
    root = set_dir(name, version)
    lib = root / "lib"
    wanted = _manifest(artifacts)
    if _complete(root, wanted):
        return lib
    if offline is None:
        offline = os.environ.get("TXNCHAOS_MAVEN_OFFLINE", "") not in ("", "0")
    if offline:
        raise MavenError(
            f"{name} {version} is not in the cache ({root}) and fetching is off "
            "(TXNCHAOS_MAVEN_OFFLINE)"
        )
    root.parent.mkdir(parents=True, exist_ok=True)
    with _locked(root.parent / f".{version}.lock"):
        if _complete(root, wanted):  # another process fetched it while we waited
            return lib
        _fetch(name, version, artifacts, root, say, wanted)
    return lib


def _manifest(artifacts: Sequence[Artifact]) -> str:
    return "".join(f"{a} excluding {','.join(a.exclusions)}\n" for a in artifacts)


def _complete(root: Path, manifest: str) -> bool:
    try:
        return (root / "complete").read_text() == manifest
    except OSError:
        return False


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _mvn() -> str:
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError(
            "Maven (mvn) is not installed: it fetches Apache Kafka's releases from Maven "
            "Central (on Debian: apt-get install maven)"
        )
    return mvn


def _pom(name: str, version: str, artifacts: Sequence[Artifact]) -> str:
    deps = "\n    ".join(a.pom_dependency() for a in artifacts)
    return f"""<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>txnchaos.cache</groupId>
  <artifactId>{name}</artifactId>
  <version>{version}</version>
  <packaging>pom</packaging>
  <dependencies>
    {deps}
  </dependencies>
</project>
"""


def _fetch(
    name: str,
    version: str,
    artifacts: Sequence[Artifact],
    root: Path,
    say: Callable[[str], None],
    manifest: str,
) -> None:
    mvn = _mvn()
    say(f"fetching {name} {version} from Maven Central into {root} (first use only)")
    for a in artifacts:
        say(f"  {a}")
    # Resolve into a scratch directory beside the final one, then rename: a set is either
    # complete or absent, whatever kills this process.
    scratch = Path(tempfile.mkdtemp(prefix=f".{version}.", dir=root.parent))
    try:
        (scratch / "pom.xml").write_text(_pom(name, version, artifacts))
        log = scratch / "mvn.log"
        t0 = time.monotonic()
        cmd = [
            mvn,
            "-B",
            "-f",
            str(scratch / "pom.xml"),
            "dependency:copy-dependencies",
            "-DincludeScope=runtime",
            f"-DoutputDirectory={scratch / 'lib'}",
        ]
        with log.open("w") as out:
            proc = subprocess.Popen(
                cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
            )
            assert proc.stdout is not None
            fetched = 0
            deadline = time.monotonic() + MVN_TIMEOUT_S
            for line in proc.stdout:
                out.write(line)
                if "Downloaded from" in line:
                    fetched += 1
                    if fetched % 20 == 0:
                        say(f"  {fetched} files downloaded ({time.monotonic() - t0:.0f}s)")
                if time.monotonic() > deadline:
                    proc.kill()
                    break
            code = proc.wait()
        if code != 0:
            raise MavenError(
                f"Maven could not resolve {name} {version}: {_mvn_reason(log)} (full log: "
                f"{_keep_log(log, root)})"
            )
        jars = sorted((scratch / "lib").glob("*.jar"))
        if not jars:
            raise MavenError(f"Maven resolved no jars for {name} {version} (log: {log})")
        (scratch / "complete").write_text(manifest)
        if root.exists():
            shutil.rmtree(root)
        scratch.rename(root)
        say(f"fetched {name} {version}: {len(jars)} jars in {time.monotonic() - t0:.0f}s")
    finally:
        if scratch.exists():
            shutil.rmtree(scratch, ignore_errors=True)


def _keep_log(log: Path, root: Path) -> Path:
    kept = root.parent / f"{root.name}.failed.log"
    try:
        shutil.copyfile(log, kept)
    except OSError:
        return log
    return kept


def _mvn_reason(log: Path) -> str:
    """The first Maven ERROR line worth showing (an unknown version says which artifact)."""
    try:
        lines = log.read_text(errors="replace").splitlines()
    except OSError:
        return "no log"
    for line in lines:
        text = re.sub(r"\x1b\[[0-9;]*m", "", line)
        if text.startswith("[ERROR]") and ("Could not" in text or "Failed" in text):
            text = text.removeprefix("[ERROR] ").strip()
            return text[:400]
    return "mvn exited with an error"
