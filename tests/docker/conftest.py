"""Fixtures for tests that need a real Docker engine (the ``docker`` marker).

The engine is the one ``scripts/bootstrap.sh --docker`` starts for this repository: its
address comes from ``DOCKER_HOST`` or, when that is unset, from ``var/docker/env``.
Without a reachable engine the tests skip on a developer machine, but fail under CI
(``CI=true``): there a missing engine is a broken pipeline, not an optional extra.

Containers are driven through the ``docker`` CLI (no Python client library needed).
Everything a test starts through :class:`Docker` carries a per-session label and is removed
when the session ends, whatever happened to the test.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NODE_IMAGE = os.environ.get("TXNCHAOS_NODE_IMAGE", "txnchaos-node:dev")
SESSION_LABEL = "org.txnchaos.test-session"
BUILD_TIMEOUT_S = 1500  # a cold build includes debootstrap of the base image


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes", "on"}


def docker_host() -> str | None:
    """DOCKER_HOST from the environment, else from bootstrap's var/docker/env."""
    if os.environ.get("DOCKER_HOST"):
        return os.environ["DOCKER_HOST"]
    envfile = REPO / "var" / "docker" / "env"
    if envfile.is_file():
        match = re.search(r"DOCKER_HOST=(\S+)", envfile.read_text())
        if match:
            return match.group(1).strip("'\"")
    return None


@dataclass
class Docker:
    """A thin wrapper over the docker CLI bound to one engine and one test session."""

    binary: str
    env: dict[str, str] = field(repr=False)
    session: str = field(default_factory=lambda: uuid.uuid4().hex[:12])

    def __call__(
        self, *args: str, check: bool = True, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [self.binary, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"docker {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    @property
    def labels(self) -> list[str]:
        """`docker run/create` arguments that tie a container to this session."""
        return ["--label", f"{SESSION_LABEL}={self.session}"]

    def start(self, image: str, *, options: Sequence[str] = (), args: Sequence[str] = ()) -> str:
        """Starts a detached, session-labelled container; returns its id."""
        result = self("run", "--detach", *self.labels, *options, image, *args)
        return result.stdout.strip()

    def logs(self, container: str) -> str:
        result = self("logs", container, check=False, timeout=30)
        return result.stdout + result.stderr

    def remove_session_containers(self) -> None:
        found = self(
            "ps", "-aq", "--filter", f"label={SESSION_LABEL}={self.session}", check=False
        ).stdout.split()
        if found:
            self("rm", "--force", "--volumes", *found, check=False, timeout=120)


def _unavailable(reason: str) -> None:
    if in_ci():
        pytest.fail(f"Docker engine required under CI: {reason}", pytrace=False)
    pytest.skip(f"no Docker engine: {reason} (run scripts/bootstrap.sh --docker)")


@pytest.fixture(scope="session")
def docker() -> Iterator[Docker]:
    binary = shutil.which("docker")
    if binary is None:
        _unavailable("the docker client is not installed")
        raise AssertionError("unreachable")
    env = dict(os.environ)
    host = docker_host()
    if host:
        env["DOCKER_HOST"] = host
    client = Docker(binary=binary, env=env)
    try:
        probe = client("info", "--format", "{{.ServerVersion}}", check=False, timeout=30)
    except subprocess.TimeoutExpired:
        _unavailable(f"`docker info` timed out (DOCKER_HOST={host})")
        raise AssertionError("unreachable") from None
    if probe.returncode != 0 or not probe.stdout.strip():
        _unavailable(f"`docker info` failed (DOCKER_HOST={host}): {probe.stderr.strip()}")
    try:
        yield client
    finally:
        client.remove_session_containers()


@pytest.fixture(scope="session")
def node_image(docker: Docker) -> str:
    """The node image, built (or found up to date) by scripts/build-image.sh."""
    env = dict(docker.env, TAG=NODE_IMAGE)
    try:
        result = subprocess.run(
            ["bash", str(REPO / "scripts" / "build-image.sh")],
            env=env,
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"scripts/build-image.sh took more than {BUILD_TIMEOUT_S}s", pytrace=False)
    if result.returncode != 0:
        pytest.fail(
            f"scripts/build-image.sh failed ({result.returncode}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}",
            pytrace=False,
        )
    return NODE_IMAGE
