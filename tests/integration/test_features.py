"""The transaction.version feature against real nodes: set at start, reported by
ApiVersions on every node, changed with UpdateFeatures (through any node) and with
``txnchaos cluster features``, kept across a controller restart."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from txnchaos.harness.launch.local import LocalCluster

from ..conftest import start_cluster
from .raw_client import RawClient

pytestmark = pytest.mark.integration

TV = "transaction.version"
INVALID_UPDATE_VERSION = 95
UPGRADE, SAFE_DOWNGRADE = 1, 2


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    """A coordinator node (the controller) and two brokers, at TV1."""
    c = start_cluster(tmp_path / "c", brokers=2, coordinators=1, settings=[f"{TV}=1"])
    try:
        yield c
    finally:
        c.down()


def clients(cluster: LocalCluster) -> dict[int, RawClient]:
    return {n["id"]: RawClient(n["host"], n["port"]) for n in cluster.state()["nodes"]}


def versions(client: RawClient, version: int = 3) -> Any:
    return client.request(18, version, client_software_name="t", client_software_version="1")


def finalized(client: RawClient) -> tuple[dict[str, int], int]:
    r = versions(client)
    levels = {f.name: int(f.max_version_level) for f in r.finalized_features}
    for f in r.finalized_features:
        assert f.min_version_level == f.max_version_level
    return levels, int(r.finalized_features_epoch)


def update(client: RawClient, level: int, upgrade_type: int, *, version: int = 1, **extra: Any):
    return client.request(
        57,
        version,
        feature_updates=[{"feature": TV, "max_version_level": level, "upgrade_type": upgrade_type}],
        **extra,
    )


def test_feature_set_at_start_and_reported_by_every_node(cluster: LocalCluster) -> None:
    conns = clients(cluster)
    try:
        for client in conns.values():
            levels, epoch = finalized(client)
            assert levels == {TV: 1} and epoch >= 0
            # As Kafka (KAFKA-17492): v3 omits supported features whose minimum is 0.
            assert versions(client, 3).supported_features == ()
            (supported,) = versions(client, 4).supported_features
            assert (supported.name, supported.min_version, supported.max_version) == (TV, 0, 2)
    finally:
        for client in conns.values():
            client.close()


def test_update_features_through_a_broker(cluster: LocalCluster) -> None:
    conns = clients(cluster)
    broker = conns[1]  # not the controller: the request is forwarded
    try:
        _, before = finalized(broker)
        r = update(broker, 2, UPGRADE, validate_only=True)
        assert int(r.error_code) == 0
        assert finalized(broker)[0] == {TV: 1}
        r = update(broker, 2, UPGRADE)
        assert int(r.error_code) == 0 and [int(x.error_code) for x in r.results] == [0]
        # Answered once every node has the new level.
        for client in conns.values():
            levels, epoch = finalized(client)
            assert levels == {TV: 2} and epoch > before
        refused = update(broker, 1, UPGRADE)
        assert int(refused.error_code) == INVALID_UPDATE_VERSION
        assert "downgrade" in refused.error_message
        assert int(update(broker, 3, UPGRADE).error_code) == INVALID_UPDATE_VERSION
        assert int(update(broker, -1, SAFE_DOWNGRADE).error_code) == INVALID_UPDATE_VERSION
        assert int(update(broker, 2, SAFE_DOWNGRADE, version=2).error_code) == 0  # no change
        r = update(broker, 0, SAFE_DOWNGRADE, version=2)
        assert int(r.error_code) == 0
        for client in conns.values():
            assert finalized(client)[0] == {}  # level 0: not finalized
        r = broker.request(
            57,
            0,
            feature_updates=[{"feature": TV, "max_version_level": 1, "allow_downgrade": False}],
        )
        assert int(r.error_code) == 0
        assert finalized(conns[2])[0] == {TV: 1}
    finally:
        for client in conns.values():
            client.close()


def test_level_survives_a_controller_restart(cluster: LocalCluster) -> None:
    controller = next(n["id"] for n in cluster.state()["nodes"] if n["role"] == "coordinator")
    conns = clients(cluster)
    try:
        assert int(update(conns[1], 2, UPGRADE).error_code) == 0
    finally:
        for client in conns.values():
            client.close()
    cluster.restart_node(controller)
    conns = clients(cluster)
    try:
        assert finalized(conns[controller])[0] == {TV: 2}
    finally:
        for client in conns.values():
            client.close()


def txnchaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cluster_features_cli(tmp_path: Path) -> None:
    data, state_file = tmp_path / "data", tmp_path / "state.json"
    up = txnchaos(
        "cluster", "up", "--brokers", "1", "--data-dir", str(data), "--state", str(state_file),
        "--set", f"{TV}=0", "--detach",
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    try:
        shown = txnchaos("cluster", "features", "--state", str(state_file))
        assert shown.returncode == 0, shown.stderr
        assert json.loads(shown.stdout)["features"][TV]["finalized"] == 0
        changed = txnchaos("cluster", "features", "--state", str(state_file), "--set", f"{TV}=2")
        assert changed.returncode == 0, changed.stderr
        doc = json.loads(changed.stdout)
        assert doc["features"][TV] == {"finalized": 2, "supported_min": 0, "supported_max": 2}
        down = txnchaos("cluster", "features", "--state", str(state_file), "--set", f"{TV}=1")
        assert down.returncode == 0, down.stderr  # a lower level goes as a safe downgrade
        assert json.loads(down.stdout)["features"][TV]["finalized"] == 1
        bad = txnchaos("cluster", "features", "--state", str(state_file), "--set", f"{TV}=7")
        assert bad.returncode != 0 and "INVALID_UPDATE_VERSION" in bad.stderr
    finally:
        txnchaos("cluster", "down", "--state", str(state_file))
