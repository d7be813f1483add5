"""``txnchaos --version``: the package's version and the client libraries a run drives
(librdkafka's only by loading it, so only when asked)."""

from __future__ import annotations

import platform
from importlib import metadata


def _installed(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def package_version() -> str:
    return _installed("txnchaos") or "unknown"


def version_text() -> str:
    lines = [f"txnchaos {package_version()}"]
    binding = _installed("confluent-kafka")
    if binding:
        try:
            import confluent_kafka

            lines.append(
                f"confluent-kafka {binding} (librdkafka {confluent_kafka.libversion()[0]})"
            )
        except ImportError:
            lines.append(f"confluent-kafka {binding}")
    for name in ("locust", "pyspark"):
        found = _installed(name)
        if found:
            lines.append(f"{name} {found}")
    lines.append(f"Python {platform.python_version()}")
    return "\n".join(lines)
