"""The node image (Dockerfile, scripts/build-image.sh) against a real Docker engine."""

from __future__ import annotations

import contextlib
import socket
import time
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from conftest import Docker  # tests/docker/conftest.py (fixtures: docker, node_image)

# The first test may build the image (a cold build debootstraps the base: minutes).
pytestmark = [pytest.mark.docker, pytest.mark.timeout(1800)]


def test_image_holds_the_node_runtime_only(docker: Docker, node_image: str) -> None:
    """The project (every package the node imports) and the node's dependencies are
    installed; the harness/analysis stacks (pyspark, pyarrow, confluent-kafka) and pip are not.

    An editable install hides a package directory without __init__.py; the image's real
    wheel does not, so this import is the check that packaging picked up every layer."""
    script = (
        "import importlib.metadata as md, importlib.util as u\n"
        "import click, cramjam, crc32c, kio, prometheus_client, pydantic, re2, rich, yaml\n"
        "import txnchaos.cluster.node, txnchaos.jobs.cli\n"
        "print('txnchaos', md.version('txnchaos'))\n"
        "for name in ('pyspark', 'pyarrow', 'confluent_kafka', 'pip'):\n"
        "    print(name, 'present' if u.find_spec(name) else 'absent')\n"
    )
    result = docker(
        "run",
        "--rm",
        *docker.labels,
        "--network",
        "none",
        "--entrypoint",
        "/opt/txnchaos/bin/python",
        node_image,
        "-c",
        script,
    )
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert lines["txnchaos"]
    for name in ("pyspark", "pyarrow", "confluent_kafka", "pip"):
        assert lines[name] == "absent", f"{name} should not be in the node image"


def test_image_is_labelled_with_its_source_hash(docker: Docker, node_image: str) -> None:
    label = docker(
        "image",
        "inspect",
        "--format",
        '{{ index .Config.Labels "org.txnchaos.source-hash" }}',
        node_image,
    ).stdout.strip()
    assert len(label) == 64 and all(c in "0123456789abcdef" for c in label)


def test_node_help_exits_zero(docker: Docker, node_image: str) -> None:
    """The ENTRYPOINT is `txnchaos node`: `--help` prints its usage and exits 0."""
    result = docker(
        "run", "--rm", *docker.labels, "--network", "none", node_image, "--help", check=False
    )
    assert result.returncode == 0, f"exit {result.returncode}:\n{result.stdout}\n{result.stderr}"
    assert "Usage:" in result.stdout
    assert "node" in result.stdout


def _unused_local_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_node_container_answers_admin_client(docker: Docker, node_image: str) -> None:
    """A real node in a container serves Metadata to confluent-kafka's AdminClient through
    a published port."""
    from confluent_kafka.admin import AdminClient

    port = _unused_local_port()
    container = docker.start(
        node_image,
        options=["--publish", f"127.0.0.1:{port}:9092"],
        args=[
            "--id=1",
            "--roles=broker,coordinator",
            "--data-dir=/var/lib/txnchaos/node-1",
            "--host=0.0.0.0",
            "--port=9092",
            "--advertised-host=127.0.0.1",
            f"--advertised-port={port}",
        ],
    )
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}", "socket.timeout.ms": 5000})
    deadline = time.monotonic() + 60
    metadata = None
    last_error: Exception | None = None
    while metadata is None and time.monotonic() < deadline:
        state = docker("inspect", "--format", "{{.State.Running}}", container).stdout.strip()
        if state != "true":
            pytest.fail(f"node container exited:\n{docker.logs(container)}")
        try:
            metadata = admin.list_topics(timeout=5)
        except Exception as exc:  # KafkaException while the node starts
            last_error = exc
    if metadata is None:
        pytest.fail(f"no metadata within 60s ({last_error}):\n{docker.logs(container)}")
    assert [(b.host, b.port) for b in metadata.brokers.values()] == [("127.0.0.1", port)]
    with contextlib.suppress(Exception):
        docker("stop", "--time", "10", container, check=False)
