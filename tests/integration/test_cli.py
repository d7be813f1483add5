"""The command-line contract: cluster up/kill/restart/down with the state file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient

pytestmark = pytest.mark.integration


def txnchaos(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def test_cluster_lifecycle_through_the_cli(tmp_path: Path) -> None:
    data, state_file = tmp_path / "data", tmp_path / "state.json"
    up = txnchaos(
        "cluster",
        "up",
        "--brokers",
        "2",
        "--data-dir",
        str(data),
        "--set",
        "num.partitions=3",
        "--detach",
        "--state",
        str(state_file),
    )
    assert up.returncode == 0, up.stderr
    state = json.loads(state_file.read_text())
    try:
        assert state["data_dir"] == str(data.resolve())
        assert [n["id"] for n in state["nodes"]] == [1, 2]
        assert state["nodes"][0]["role"] == "broker+coordinator"
        for n in state["nodes"]:
            assert n["host"] == "127.0.0.1" and n["port"] > 0 and n["metrics_port"] > 0
            assert alive(n["pid"])
        assert state["bootstrap"] == ",".join(f"127.0.0.1:{n['port']}" for n in state["nodes"])
        admin = AdminClient({"bootstrap.servers": state["bootstrap"]})
        assert len(admin.list_topics(timeout=10).brokers) == 2

        killed = txnchaos("cluster", "kill", "--state", str(state_file), "2")
        assert killed.returncode == 0, killed.stderr
        after_kill = json.loads(state_file.read_text())
        assert after_kill["nodes"][1]["pid"] is None
        assert not alive(state["nodes"][1]["pid"])

        restarted = txnchaos("cluster", "restart", "--state", str(state_file), "2")
        assert restarted.returncode == 0, restarted.stderr
        after_restart = json.loads(state_file.read_text())
        node2 = after_restart["nodes"][1]
        assert alive(node2["pid"]) and node2["port"] == state["nodes"][1]["port"]
    finally:
        down = txnchaos("cluster", "down", "--state", str(state_file))
    assert down.returncode == 0, down.stderr
    for n in json.loads(state_file.read_text())["nodes"]:
        assert n["pid"] is None
    for n in state["nodes"]:
        assert not alive(n["pid"])

    # `cluster up` on the same data dir restarts the same cluster (same ports if free).
    again = txnchaos(
        "cluster",
        "up",
        "--brokers",
        "2",
        "--data-dir",
        str(data),
        "--detach",
        "--state",
        str(state_file),
    )
    assert again.returncode == 0, again.stderr
    try:
        state2 = json.loads(state_file.read_text())
        assert [n["id"] for n in state2["nodes"]] == [1, 2]
    finally:
        txnchaos("cluster", "down", "--state", str(state_file))


def test_bad_arguments_get_clear_errors(tmp_path: Path) -> None:
    bad = txnchaos(
        "cluster",
        "up",
        "--brokers",
        "1",
        "--data-dir",
        str(tmp_path),
        "--set",
        "no.such.setting=1",
        "--detach",
    )
    assert bad.returncode != 0
    assert "unknown setting 'no.such.setting'" in bad.stderr
    bad = txnchaos("cluster", "up", "--brokers", "0", "--data-dir", str(tmp_path / "x"), "--detach")
    assert bad.returncode != 0 and "--brokers must be at least 1" in bad.stderr
    missing = txnchaos("cluster", "down", "--state", str(tmp_path / "nope.json"))
    assert missing.returncode != 0 and "cannot read state file" in missing.stderr


def test_a_cluster_started_without_a_state_file_is_driven_by_its_data_dir(tmp_path: Path) -> None:
    data = tmp_path / "data"
    up = txnchaos("cluster", "up", "--brokers", "2", "--data-dir", str(data), "--detach")
    assert up.returncode == 0, up.stderr
    assert f"stop it with: txnchaos cluster down --data-dir {data}" in up.stdout
    try:
        status = txnchaos("cluster", "status", "--data-dir", str(data))
        assert status.returncode == 0, status.stderr
        nodes = json.loads(status.stdout)["nodes"]
        assert [n["id"] for n in nodes] == [1, 2] and all(n["alive"] for n in nodes)
        pids = [n["pid"] for n in nodes]

        killed = txnchaos("cluster", "kill", "--data-dir", str(data), "2")
        assert killed.returncode == 0, killed.stderr
        assert not alive(pids[1]) and alive(pids[0])
        after = json.loads(txnchaos("cluster", "status", "--data-dir", str(data)).stdout)
        assert [n["alive"] for n in after["nodes"]] == [True, False]
    finally:
        down = txnchaos("cluster", "down", "--data-dir", str(data))
    assert down.returncode == 0, down.stderr
    assert not any(alive(pid) for pid in pids)
    assert not (tmp_path / "state.json").exists()  # nothing written where nobody asked

    usage = "give either --state FILE or --data-dir DIR"
    neither = txnchaos("cluster", "down")
    assert neither.returncode == 2 and usage in neither.stderr
    both = txnchaos("cluster", "down", "--data-dir", str(data), "--state", str(tmp_path / "s.json"))
    assert both.returncode == 2 and usage in both.stderr
    stranger = txnchaos("cluster", "down", "--data-dir", str(tmp_path / "elsewhere"))
    assert stranger.returncode != 0 and "has no cluster.json" in stranger.stderr


def _allowed_cpus(pid: int) -> set[str]:
    """Cpus_allowed_list of every thread of ``pid``."""
    lists = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        for line in (task / "status").read_text().splitlines():
            if line.startswith("Cpus_allowed_list:"):
                lists.add(line.split(":", 1)[1].strip())
    return lists


def test_cpus_place_every_node_and_survive_restarts(tmp_path: Path) -> None:
    data, state_file = tmp_path / "data", tmp_path / "state.json"
    cpu = str(max(os.sched_getaffinity(0)))
    refused = txnchaos("cluster", "up", "--data-dir", str(data), "--cpus", "0,100000", "--detach")
    assert refused.returncode != 0
    assert "CPU(s) 100000 not available" in refused.stderr
    assert not (data / "cluster.json").exists()  # refused before anything was written

    up = txnchaos(
        "cluster", "up", "--brokers", "2", "--data-dir", str(data), "--cpus", cpu,
        "--detach", "--state", str(state_file),
    )  # fmt: skip
    assert up.returncode == 0, up.stderr
    try:
        assert json.loads((data / "cluster.json").read_text())["cpus"] == cpu
        nodes = json.loads(state_file.read_text())["nodes"]
        for n in nodes:  # the node's threads (the metrics server's among them) too
            assert _allowed_cpus(n["pid"]) == {cpu}
            assert os.sched_getscheduler(n["pid"]) == os.SCHED_BATCH
        restarted = txnchaos("cluster", "restart", "--state", str(state_file), "2")
        assert restarted.returncode == 0, restarted.stderr
        node2 = json.loads(state_file.read_text())["nodes"][1]
        assert node2["pid"] != nodes[1]["pid"] and _allowed_cpus(node2["pid"]) == {cpu}
    finally:
        down = txnchaos("cluster", "down", "--state", str(state_file))
    assert down.returncode == 0, down.stderr

    # `--cpus all` drops the saved list: the nodes may run anywhere again
    again = txnchaos(
        "cluster", "up", "--brokers", "2", "--data-dir", str(data), "--cpus", "all",
        "--detach", "--state", str(state_file),
    )  # fmt: skip
    assert again.returncode == 0, again.stderr
    try:
        assert json.loads((data / "cluster.json").read_text())["cpus"] is None
        usable = os.sched_getaffinity(0)
        for n in json.loads(state_file.read_text())["nodes"]:
            assert os.sched_getaffinity(n["pid"]) == usable
            assert os.sched_getscheduler(n["pid"]) == os.SCHED_OTHER
    finally:
        txnchaos("cluster", "down", "--state", str(state_file))
