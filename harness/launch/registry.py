"""Launchers by name: ``local`` (default), ``docker``, ``external``, ``kafka``.

``get_launcher("external", bootstrap="host:9092")``; options go to the launcher's
constructor. The docker launcher runs the project's nodes, or Apache Kafka's with
``flavour="apache-kafka"`` (and ``version=``). Modules are imported on demand (the docker
launcher needs testcontainers, which the other two do not).
"""

from __future__ import annotations

from typing import Any

from .base import Launcher
from .errors import LaunchError

LAUNCHERS = ("local", "docker", "external", "kafka")
DEFAULT_LAUNCHER = "local"


def get_launcher(name: str = DEFAULT_LAUNCHER, **options: Any) -> Launcher:
    """The launcher called ``name``, built with ``options``; LaunchError if unknown."""
    key = (name or "").strip().lower()
    if key == "local":
        from .local_launcher import LocalLauncher

        if options:
            raise LaunchError(f"the local launcher takes no options, got {sorted(options)}")
        return LocalLauncher()
    if key == "docker":
        flavour = options.pop("flavour", None) or "txnchaos"
        if flavour == "apache-kafka":
            from .kafka.docker import KafkaDockerLauncher

            return _build(KafkaDockerLauncher, key, options)
        if flavour != "txnchaos":
            raise LaunchError(f"unknown flavour {flavour!r}; choose txnchaos or apache-kafka")
        from .docker import DockerLauncher

        return _build(DockerLauncher, key, options)
    if key == "external":
        from .external import ExternalLauncher

        if not options.get("bootstrap"):
            raise LaunchError("the external launcher needs --bootstrap HOST:PORT")
        return _build(ExternalLauncher, key, options)
    if key == "kafka":
        from .kafka.launcher import KafkaLauncher

        return _build(KafkaLauncher, key, options)
    raise LaunchError(f"unknown launcher {name!r}; choose one of: {', '.join(LAUNCHERS)}")


def _build(cls: Any, name: str, options: dict[str, Any]) -> Launcher:
    try:
        return cls(**options)
    except TypeError as exc:
        raise LaunchError(f"bad options for the {name} launcher: {exc}") from exc
