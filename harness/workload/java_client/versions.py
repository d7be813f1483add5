"""Which kafka-clients release a Java user runs, and where its jars are.

A user's ``kafka_clients_version`` wins; without one, a run against Apache Kafka uses the
cluster's own release (``run.json``'s cluster description: flavour ``apache-kafka`` and its
``version``), and any other run :data:`DEFAULT_VERSION`. Each release's jars (kafka-clients,
its runtime dependencies and an SLF4J binding, so the client's warnings reach the user's log)
are one set of :mod:`txnchaos.harness.maven`'s cache, fetched on first use.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from ...maven import Artifact, resolve

#: The release a Java user runs when nothing names one: the newest served, also the Apache
#: Kafka launcher's default (verified against our cluster and Apache Kafka 4.4.0 and 4.1.1,
#: at transaction.version 0 and 2).
DEFAULT_VERSION = "4.4.0"
#: The oldest release the program supports, and the one it is compiled against.
COMPILE_AGAINST = "4.0.0"
#: kafka-clients 4.x logs through SLF4J 1.7 (its slf4j-api is 1.7.36 in every 4.x release).
SLF4J_BINDING = Artifact("org.slf4j", "slf4j-simple", "1.7.36")
SET_NAME = "kafka-clients"
#: Kafka release numbers (what ``kafka_clients_version`` accepts).
VERSION_PATTERN = r"^[0-9]+\.[0-9]+\.[0-9]+([.-][0-9A-Za-z.-]+)?$"


def client_lib(version: str, progress: Callable[[str], None] | None = None) -> Path:
    """The ``lib`` directory of kafka-clients ``version``'s jars (fetched on first use)."""
    artifacts = [Artifact("org.apache.kafka", "kafka-clients", version), SLF4J_BINDING]
    return resolve(SET_NAME, version, artifacts, progress=progress)


def cluster_kafka_version(run_dir: str | os.PathLike[str]) -> str | None:
    """The Apache Kafka release of the run's cluster, when run.json says it is one."""
    try:
        info = json.loads((Path(run_dir) / "run.json").read_text())
    except (OSError, ValueError):
        return None
    cluster = info.get("cluster") if isinstance(info, dict) else None
    if not isinstance(cluster, dict) or cluster.get("flavour") != "apache-kafka":
        return None
    version = cluster.get("version")
    return version if isinstance(version, str) and version else None


def client_version(chosen: str | None, run_dir: str | os.PathLike[str]) -> str:
    """The release a user runs: its own choice, else the cluster's, else the default."""
    return chosen or cluster_kafka_version(run_dir) or DEFAULT_VERSION
