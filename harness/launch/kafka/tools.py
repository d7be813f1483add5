"""Apache Kafka's own command-line tools and test clients, run from the release's
``kafka-tools`` jar set (fetched from Maven Central into the cache once, like the release).

``run_tool("TransactionsCommand", ["--bootstrap-server", B, "list"])`` runs
``org.apache.kafka.tools.TransactionsCommand`` (what ``kafka-transactions.sh`` runs) and
returns the finished process; :data:`TOOLS` names the classes by the scripts' names.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path

from ...maven import Artifact, MavenError, classpath, resolve
from ..errors import LaunchError
from .release import DEFAULT_VERSION, SLF4J_VERSION, KafkaRelease, java_binary

#: the tools by their scripts' names (bin/kafka-*.sh) -> main class in kafka-tools 4.x
TOOLS = {
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "transactional-message-copier": "org.apache.kafka.tools.TransactionalMessageCopier",
}
TIMEOUT_S = 180.0


def tools_lib(
    version: str = DEFAULT_VERSION, progress: Callable[[str], None] | None = None
) -> Path:
    """The jar directory of ``kafka-tools`` ``version`` and its dependencies (4.x only:
    the tools moved into ``kafka-tools`` with 4.0)."""
    release = KafkaRelease.parse(version)
    if release.major < 4:
        raise LaunchError(f"Kafka's tools are run from kafka-tools 4.x, not {version}")
    artifacts = [
        Artifact("org.apache.kafka", "kafka-tools", version),
        Artifact("org.slf4j", "slf4j-api", SLF4J_VERSION),
        Artifact("org.slf4j", "slf4j-simple", SLF4J_VERSION),
    ]
    try:
        return resolve("kafka-tools", version, artifacts, progress=progress)
    except MavenError as exc:
        raise LaunchError(f"Apache Kafka's tools {version}: {exc}") from exc


def tool_command(tool: str, args: Sequence[str], version: str = DEFAULT_VERSION) -> list[str]:
    """The ``java`` command line of ``tool`` (a script name in :data:`TOOLS` or a class)."""
    main = TOOLS.get(tool, tool)
    return [
        java_binary(),
        "-Xms32m",
        "-XX:+UseSerialGC",
        "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
        "-cp",
        classpath(tools_lib(version)),
        main,
        *args,
    ]


def run_tool(
    tool: str,
    args: Sequence[str],
    version: str = DEFAULT_VERSION,
    timeout: float = TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run ``tool`` to its end (stdout, stderr as text; its exit code is not checked)."""
    return subprocess.run(
        tool_command(tool, args, version),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        stdin=subprocess.DEVNULL,
    )
