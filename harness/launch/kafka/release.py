"""Apache Kafka releases: which one runs, what it needs, and its jars from Maven Central.

A release is fetched as one artifact set (:mod:`txnchaos.harness.maven`):
``org.apache.kafka:kafka_2.13:V`` (``kafka_2.12`` before 2.4.0) with its runtime
dependencies, plus an SLF4J binding (``slf4j-simple``, so the node logs to its
``node.log``; the release's own jars carry no binding). The Prometheus JMX exporter java
agent is a set of its own (one jar, passed as ``-javaagent``). Both live in the shared
cache: fetched on first use, offline afterwards.

Modes. A 4.x release runs KRaft only (a controller quorum and brokers). A release older
than :data:`FIRST_KRAFT` runs with ZooKeeper (the ZooKeeper server comes with the
release's own dependency set: ``kafka_2.13`` 2.x depends on ``org.apache.zookeeper``).
3.3-3.9 could run either way; the launcher uses KRaft for them.

Java. Kafka 4.x brokers need Java 17 or newer. :func:`java_problem` says why a release
cannot run on a given Java (see docs/apache-kafka.md for what was measured).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ...maven import Artifact, MavenError, resolve
from ..errors import LaunchError

#: the release ``--launcher kafka`` runs unless told otherwise (docs/apache-kafka.md: why)
DEFAULT_VERSION = "4.4.0"
#: the first release the launcher runs in KRaft mode (earlier ones get a ZooKeeper)
FIRST_KRAFT = (3, 3, 0)
#: the first release whose storage tool takes ``--feature transaction.version=N``
FIRST_TRANSACTION_VERSION = (4, 0, 0)
FIRST_CONTROLLER_ADVERTISED = (3, 9, 0)
#: the newest release whose KIP-939 support was checked: up to it, InitProducerId v6 is an
#: unstable version (offered only with unstable.api.versions.enable) and keepPreparedTxn is
#: answered UNSUPPORTED_VERSION (docs/findings/kip-939-keep-prepared-txn-not-implemented.md)
NEWEST_WITHOUT_PREPARED_RECOVERY = (4, 4, 0)
#: the SLF4J binding put beside the release's jars (Kafka 2.x-4.x log through SLF4J 1.7)
SLF4J_VERSION = "1.7.36"
JMX_EXPORTER_VERSION = "1.0.1"

_VERSION_RE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


@dataclass(frozen=True)
class KafkaRelease:
    """One Apache Kafka release, e.g. ``KafkaRelease.parse("4.4.0")``."""

    version: str
    major: int
    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> KafkaRelease:
        m = _VERSION_RE.match(text.strip())
        if m is None:
            raise LaunchError(
                f"--kafka-version expects a release such as {DEFAULT_VERSION}, got {text!r}"
            )
        return cls(text.strip(), int(m[1]), int(m[2]), int(m[3]))

    @property
    def key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    @property
    def kraft(self) -> bool:
        return self.key >= FIRST_KRAFT

    @property
    def controller_advertises(self) -> bool:
        """Whether a KRaft controller may advertise its listener (KIP-853, from 3.9.0;
        before, "The advertised.listeners config must be empty when
        process.roles=controller")."""
        return self.key >= FIRST_CONTROLLER_ADVERTISED

    @property
    def has_transaction_version(self) -> bool:
        """Whether the release has the ``transaction.version`` feature (KIP-890 part 2)."""
        return self.key >= FIRST_TRANSACTION_VERSION

    @property
    def recovers_prepared_transactions(self) -> bool:
        """Whether a KIP-939 producer can take back its prepared transaction after a crash
        (InitProducerId keepPreparedTxn); False up to :data:`NEWEST_WITHOUT_PREPARED_RECOVERY`,
        later releases are let try."""
        return self.key > NEWEST_WITHOUT_PREPARED_RECOVERY

    @property
    def min_java(self) -> int:
        return 17 if self.major >= 4 else 8

    @property
    def scala(self) -> str:
        """The Scala build of the server: 2.13 from 2.4.0 on (earlier ones had 2.12)."""
        return "2.13" if self.key >= (2, 4, 0) else "2.12"

    def artifacts(self) -> list[Artifact]:
        return [
            Artifact("org.apache.kafka", f"kafka_{self.scala}", self.version),
            # Declared here, so they win over the versions the release's tree names.
            Artifact("org.slf4j", "slf4j-api", SLF4J_VERSION),
            Artifact("org.slf4j", "slf4j-simple", SLF4J_VERSION),
        ]

    def __str__(self) -> str:
        return self.version


def server_lib(release: KafkaRelease, progress: Callable[[str], None] | None = None) -> Path:
    """The directory of the release's jars (fetched on first use)."""
    try:
        return resolve("apache-kafka", release.version, release.artifacts(), progress=progress)
    except MavenError as exc:
        raise LaunchError(f"Apache Kafka {release}: {exc}") from exc


def jmx_exporter_jar(progress: Callable[[str], None] | None = None) -> Path:
    """The Prometheus JMX exporter java agent's jar (fetched on first use)."""
    artifact = Artifact("io.prometheus.jmx", "jmx_prometheus_javaagent", JMX_EXPORTER_VERSION)
    try:
        lib = resolve("jmx-exporter", JMX_EXPORTER_VERSION, [artifact], progress=progress)
    except MavenError as exc:
        raise LaunchError(f"the Prometheus JMX exporter: {exc}") from exc
    jars = sorted(lib.glob("jmx_prometheus_javaagent-*.jar"))
    if not jars:
        raise LaunchError(f"no jmx_prometheus_javaagent jar in {lib}")
    return jars[0]


def java_binary() -> str:
    """The ``java`` that runs the nodes: ``$TXNCHAOS_KAFKA_JAVA_HOME/bin/java``, else
    ``$JAVA_HOME/bin/java``, else ``java`` on PATH."""
    for var in ("TXNCHAOS_KAFKA_JAVA_HOME", "JAVA_HOME"):
        home = os.environ.get(var)
        if home:
            path = Path(home) / "bin" / "java"
            if not path.exists():
                raise LaunchError(f"{var}={home} has no bin/java")
            return str(path)
    found = shutil.which("java")
    if found is None:
        raise LaunchError(
            "java is not installed: Apache Kafka's nodes are JVMs (on Debian: "
            "apt-get install openjdk-17-jre-headless)"
        )
    return found


@lru_cache(maxsize=8)
def java_major(java: str) -> int:
    """The feature release of ``java`` (17 for 17.0.15)."""
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        ).stderr
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise LaunchError(f"cannot run {java} -version: {exc}") from exc
    m = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if m is None:
        raise LaunchError(f"cannot read the version of {java}: {out.strip()[:200]}")
    first = int(m[1])
    return int(m[2]) if first == 1 and m[2] else first  # "1.8.0_x" is Java 8


def java_problem(release: KafkaRelease, major: int) -> str | None:
    """Why ``release`` cannot run on Java ``major``, or None (measured: docs/apache-kafka.md)."""
    if release.key < (2, 4, 0) and major >= 14:
        return (
            f"Apache Kafka {release} talks to ZooKeeper with its 3.4 client, which cannot "
            f"connect on Java 14 or newer (this is Java {major}; ZOOKEEPER-3779: 'Unable to "
            "canonicalize address'); 2.4.0 and later run"
        )
    if major < release.min_java:
        need = release.min_java
        return f"Apache Kafka {release} needs Java {need} or newer (this is Java {major})"
    return None
