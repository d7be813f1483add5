"""Fixtures for the launcher tests.

The Docker fixtures (``docker``: an engine, failing under CI=true when there is none;
``node_image``: the node image, built or found up to date) are the ones of
tests/docker/conftest.py, loaded from that file so both suites share one definition.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

_path = Path(__file__).resolve().parents[2] / "docker" / "conftest.py"
_spec = importlib.util.spec_from_file_location("_txnchaos_docker_fixtures", _path)
assert _spec is not None and _spec.loader is not None
_docker_fixtures = sys.modules.setdefault(_spec.name, importlib.util.module_from_spec(_spec))
if not hasattr(_docker_fixtures, "node_image"):
    _spec.loader.exec_module(_docker_fixtures)

Docker = _docker_fixtures.Docker
docker = _docker_fixtures.docker
node_image = _docker_fixtures.node_image

__all__ = ["Docker", "docker", "node_image"]
