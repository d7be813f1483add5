"""A proxied node's addressing kept in its data directory (no node process needed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from txnchaos.harness.launch.local import (
    ADDRESSING_JSON,
    ClusterLayout,
    LaunchError,
    LocalCluster,
    NodeAddressing,
    node_dir,
)


def _cluster_dir(tmp_path: Path) -> tuple[Path, ClusterLayout]:
    layout = ClusterLayout.plan(brokers=2, coordinators=1, settings=[])
    layout.save(tmp_path)
    return tmp_path, layout


def test_addressing_files_are_read_back_and_removed_by_down(tmp_path: Path) -> None:
    data_dir, layout = _cluster_dir(tmp_path)
    broker = next(n for n in layout.nodes if n.role == "broker")
    addressing = NodeAddressing(
        advertised=("127.0.0.1", 40001), controller=("127.0.0.1", 40002), peers={1001: ("h", 3)}
    )
    directory = node_dir(data_dir, broker.id)
    directory.mkdir()
    (directory / ADDRESSING_JSON).write_text(json.dumps(addressing.to_state()))

    cluster = LocalCluster.from_data_dir(data_dir)
    assert cluster.addressing == {broker.id: addressing}
    assert cluster.advertised(broker) == ("127.0.0.1", 40001)

    cluster.down()  # no node runs: nothing to signal, but the addressing is forgotten
    assert not (directory / ADDRESSING_JSON).exists()
    assert LocalCluster.from_data_dir(data_dir).addressing == {}


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"peers": {"x": "h:1"}}'])
def test_a_broken_addressing_file_is_named_in_the_error(tmp_path: Path, content: str) -> None:
    data_dir, layout = _cluster_dir(tmp_path)
    directory = node_dir(data_dir, layout.nodes[0].id)
    directory.mkdir()
    (directory / ADDRESSING_JSON).write_text(content)
    with pytest.raises(LaunchError, match=ADDRESSING_JSON):
        LocalCluster.from_data_dir(data_dir)
