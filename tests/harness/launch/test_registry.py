"""The launcher registry and the interface's pure parts (no cluster started)."""

from __future__ import annotations

import pytest

from txnchaos.harness.launch.base import ClusterSpec, LaunchError, link_name
from txnchaos.harness.launch.external import ExternalLauncher, parse_bootstrap
from txnchaos.harness.launch.local_launcher import LocalLauncher
from txnchaos.harness.launch.registry import LAUNCHERS, get_launcher


def test_launchers_by_name() -> None:
    assert LAUNCHERS == ("local", "docker", "external", "kafka")
    assert isinstance(get_launcher(), LocalLauncher)
    assert isinstance(get_launcher("local"), LocalLauncher)
    external = get_launcher("external", bootstrap="127.0.0.1:9092")
    assert isinstance(external, ExternalLauncher)
    assert external.name == "external"
    kafka = get_launcher("kafka", version="4.1.1")
    assert kafka.name == "kafka" and kafka.version == "4.1.1"  # type: ignore[attr-defined]


def test_docker_launcher_is_built_without_an_engine() -> None:
    pytest.importorskip("testcontainers")
    launcher = get_launcher("docker", image="some/image:tag")
    assert launcher.name == "docker"


def test_unknown_launcher_names_the_choices() -> None:
    with pytest.raises(
        LaunchError, match=r"unknown launcher 'k8s'.*local, docker, external, kafka"
    ):
        get_launcher("k8s")


def test_bad_options_are_launch_errors() -> None:
    with pytest.raises(LaunchError, match="needs --bootstrap"):
        get_launcher("external")
    with pytest.raises(LaunchError, match="takes no options"):
        get_launcher("local", image="x")
    with pytest.raises(LaunchError, match="bad options for the external launcher"):
        get_launcher("external", bootstrap="h:1", nodes=3)


@pytest.mark.parametrize("value", ["", "host", "host:", ":9092", "h:p", "h:1,", "h:70000"])
def test_bootstrap_must_be_host_port(value: str) -> None:
    with pytest.raises(LaunchError, match=r"HOST:PORT|empty"):
        parse_bootstrap(value)


def test_bootstrap_parsing() -> None:
    assert parse_bootstrap("a:1, b:2,[::1]:3") == [("a", 1), ("b", 2), ("::1", 3)]


def test_spec_validation_and_link_names() -> None:
    with pytest.raises(LaunchError):
        ClusterSpec(brokers=0)
    with pytest.raises(LaunchError):
        ClusterSpec(coordinators=-1)
    assert ClusterSpec().proxied is True
    assert link_name("client", 3) == "client->n3"
    assert link_name(1, 1001) == "n1->n1001"
