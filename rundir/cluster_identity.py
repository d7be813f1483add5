"""Which cluster a run judged, from run.json, for the pages people read first (the report's
header, nightly's summary and JUnit properties).

run.json's ``cluster`` (the launcher's ``ClusterHandle.describe()``) carries ``flavour``
(``txnchaos`` for our nodes, local or docker; ``apache-kafka``; ``external``) and ``version``
(our package version, the Kafka release; null if unknown), and the run its finalised
``transaction_version`` when known (top level, or in ``cluster``).  Runs recorded before a
launcher wrote them get the flavour its launcher implies and unknown for the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: the flavour each launcher implies when run.json does not say
_FLAVOUR_OF_LAUNCHER = {
    "local": "txnchaos",
    "docker": "txnchaos",
    "kafka": "apache-kafka",
    "external": "external",
}


def cluster_identity(info: Mapping[str, Any]) -> dict[str, Any]:
    """``{"flavour", "version", "transaction_version", "launcher"}`` (None where unknown)."""
    cluster = info.get("cluster") if isinstance(info.get("cluster"), Mapping) else {}
    assert isinstance(cluster, Mapping)
    launcher = cluster.get("launcher") or info.get("cluster_kind")
    flavour = cluster.get("flavour") or _FLAVOUR_OF_LAUNCHER.get(str(launcher))
    tv = info.get("transaction_version")
    if tv is None:
        tv = cluster.get("transaction_version")
    return {
        "flavour": flavour,
        "version": cluster.get("version"),
        "transaction_version": tv,
        "launcher": launcher,
    }


def cluster_settings(info: Mapping[str, Any]) -> list[str]:
    """The cluster's ``key=value`` settings as run.json records them (``cluster.spec.settings``:
    the local and docker launchers write a list of such strings; a mapping is read as one)."""
    cluster = info.get("cluster")
    spec = cluster.get("spec") if isinstance(cluster, Mapping) else None
    settings = spec.get("settings") if isinstance(spec, Mapping) else None
    if isinstance(settings, Mapping):
        return [f"{k}={v}" for k, v in settings.items()]
    return [str(s) for s in settings] if isinstance(settings, list) else []


def describe_cluster(identity: Mapping[str, Any]) -> str:
    """``apache-kafka 4.1.1, transaction.version 2`` (unknown parts said so)."""
    flavour = identity.get("flavour") or "unknown cluster"
    version = identity.get("version")
    tv = identity.get("transaction_version")
    text = f"{flavour} {version}" if version else f"{flavour} (version unknown)"
    return f"{text}, transaction.version {tv if tv is not None else 'unknown'}"
