"""The Apache Kafka node image: ``txnchaos-kafka:<version>``, built on first use.

It is the project's base image (``txnchaos-base:bookworm``, which ``scripts/build-image.sh``
makes with debootstrap, or ``python:3.11-slim-bookworm`` where a registry has it) plus:

* ``/opt/jre``: a Java runtime made on the host with ``jlink`` from the host's JDK (Debian
  12's OpenJDK 17, the base's own distribution: the same glibc, libstdc++ and zlib), only
  the modules Kafka and the JMX exporter use (~52 MB): no package manager or network in
  the build;
* ``/opt/kafka/lib``: the release's jars from the shared Maven cache
  (:func:`~.release.server_lib`), copied into the build context, never committed;
* ``/opt/kafka/jmx_prometheus_javaagent.jar``: the metrics agent.

The build context is ``var/image/kafka-<version>`` in the repository; the image carries a
label with a hash of its inputs and is rebuilt only when that changes.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import LaunchError
from .release import KafkaRelease, java_binary, jmx_exporter_jar, server_lib

REPO = Path(__file__).resolve().parents[3]
BASE_IMAGES = ("txnchaos-base:bookworm", "python:3.11-slim-bookworm")
LABEL_HASH = "org.txnchaos.kafka-source-hash"
#: what jlink puts in the runtime: Kafka's server (java.desktop for java.beans), the JMX
#: exporter (jdk.httpserver, java.management) and SASL/Kerberos support Kafka links
JRE_MODULES = (
    "java.base,java.compiler,java.desktop,java.instrument,java.logging,java.management,"
    "java.management.rmi,java.naming,java.net.http,java.prefs,java.rmi,java.scripting,"
    "java.security.jgss,java.security.sasl,java.sql,java.transaction.xa,java.xml,"
    "java.xml.crypto,jdk.crypto.ec,jdk.httpserver,jdk.management,jdk.management.agent,"
    "jdk.naming.dns,jdk.net,jdk.security.auth,jdk.security.jgss,jdk.unsupported,jdk.zipfs"
)
DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
ARG SOURCE_HASH=unknown
LABEL org.opencontainers.image.title="txnchaos-kafka" \\
      org.txnchaos.kafka-source-hash="${SOURCE_HASH}"
COPY jre/ /opt/jre/
COPY lib/ /opt/kafka/lib/
COPY jmx_prometheus_javaagent.jar /opt/kafka/jmx_prometheus_javaagent.jar
ENTRYPOINT ["/opt/jre/bin/java"]
"""


def image_tag(release: KafkaRelease) -> str:
    return f"txnchaos-kafka:{release.version}"


def ensure_image(
    client: Any, release: KafkaRelease, progress: Callable[[str], None] | None = None
) -> str:
    """The release's image in the engine ``client`` talks to (docker SDK), built when it is
    missing or its inputs changed; returns its tag."""
    say = progress or (lambda line: None)
    tag = image_tag(release)
    lib = server_lib(release, progress)
    agent = jmx_exporter_jar(progress)
    base = _base_image(client)
    digest = _hash(lib, agent, base, client)
    try:
        have = client.images.get(tag).labels.get(LABEL_HASH)
    except Exception:
        have = None
    if have == digest:
        return tag
    say(f"building {tag} from {base} (first use of this release on the docker launcher)")
    context = REPO / "var" / "image" / f"kafka-{release.version}"
    if context.exists():
        shutil.rmtree(context)
    (context / "lib").mkdir(parents=True)
    for jar in sorted(lib.glob("*.jar")):
        shutil.copy2(jar, context / "lib" / jar.name)
    shutil.copy2(agent, context / "jmx_prometheus_javaagent.jar")
    _jlink(context / "jre")
    (context / "Dockerfile").write_text(DOCKERFILE)
    try:
        client.images.build(
            path=str(context),
            tag=tag,
            network_mode="none",
            pull=False,
            rm=True,
            buildargs={"BASE_IMAGE": base, "SOURCE_HASH": digest},
        )
    except Exception as exc:
        raise LaunchError(f"building {tag} failed: {exc}") from exc
    say(f"built {tag}")
    return tag


def _base_image(client: Any) -> str:
    for name in BASE_IMAGES:
        try:
            client.images.get(name)
            return name
        except Exception:
            continue
    raise LaunchError(
        f"no base image for the Apache Kafka node image ({' or '.join(BASE_IMAGES)}) in the "
        "Docker engine: build the project's with scripts/build-image.sh"
    )


def _hash(lib: Path, agent: Path, base: str, client: Any) -> str:
    h = hashlib.sha256()
    h.update(DOCKERFILE.encode())
    h.update(JRE_MODULES.encode())
    h.update(str(client.images.get(base).id).encode())
    for jar in [*sorted(lib.glob("*.jar")), agent]:
        h.update(f"{jar.name} {jar.stat().st_size}\n".encode())
    h.update(_java_release().encode())
    return h.hexdigest()[:32]


def _java_release() -> str:
    home = Path(java_binary()).resolve().parent.parent
    release = home / "release"
    return release.read_text() if release.exists() else str(home)


def _jlink(out: Path) -> None:
    java = Path(java_binary()).resolve()
    jlink = java.parent / "jlink"
    if not jlink.exists():
        found = shutil.which("jlink")
        if found is None:
            raise LaunchError(
                "jlink is needed to make the Apache Kafka image's Java runtime "
                "(apt-get install openjdk-17-jdk-headless)"
            )
        jlink = Path(found)
    cmd = [str(jlink), "--add-modules", JRE_MODULES, "--output", str(out), "--strip-debug"]
    cmd += ["--no-header-files", "--no-man-pages", "--compress=2"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise LaunchError(f"jlink failed: {(proc.stdout + proc.stderr).strip()[-500:]}")
