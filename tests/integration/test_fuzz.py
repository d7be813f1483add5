"""A short run of the project's protocol fuzzer against live nodes (the million-case
run is in bench/README), the `txnchaos fuzz --replay` path, and the regressions the
fuzzer found."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.conftest import start_cluster
from tests.integration.raw_client import RawClient, address
from txnchaos.harness.fuzz.findings import Finding, save
from txnchaos.harness.fuzz.mutators import Case
from txnchaos.harness.fuzz.runner import FuzzOptions
from txnchaos.harness.fuzz.session import fuzz_nodes, local_nodes
from txnchaos.harness.launch.local import LocalCluster
from txnchaos.jobs.cli import main

pytestmark = pytest.mark.integration

CASES = 3_000
TYPED_CASES = 1_000
ISSUE_FRAME = bytes.fromhex("000000150003000900000001000570726f626500feffffff0f")
"""Issue 20's 25-byte Metadata v9 frame whose compact count claims ~4.29 billion topics."""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A broker and a separate coordinator (the controller): brokers then reach the
    controller over the Kafka protocol, as in a real deployment."""
    local = start_cluster(tmp_path_factory.mktemp("fuzz"), brokers=1, coordinators=1)
    yield local
    local.down()


def test_a_short_fuzz_run_is_clean(cluster: LocalCluster, tmp_path: Path) -> None:
    nodes = local_nodes(cluster)
    options = FuzzOptions(
        cases=CASES,
        seed=20,
        batch=1_000,
        concurrency=32,
        case_timeout=5.0,
        health_timeout=30.0,
        rss_limit_mb=512.0,
        findings_dir=tmp_path / "findings",
    )
    summary = asyncio.run(fuzz_nodes(nodes, options))
    assert summary.cases == CASES
    assert sum(summary.outcomes.values()) == CASES  # every case answered, closed or timed out
    assert summary.outcomes["answered"] > CASES // 10  # seeds reach the handlers
    assert summary.outcomes["closed"] > CASES // 10  # and bad frames are refused
    assert (summary.crashes, summary.hangs, summary.tracebacks, summary.mismatches) == (0, 0, 0, 0)
    assert summary.rss_over == 0
    assert summary.findings == []
    assert set(summary.max_rss_mb) == {str(n.node_id) for n in nodes}
    assert not (tmp_path / "findings").exists()


def test_a_short_typed_fuzz_run_is_clean(cluster: LocalCluster, tmp_path: Path) -> None:
    """Valid frames with hostile values (other producers' ids, control characters,
    patterns, bad configs and batches) reach the handlers: most are answered."""
    nodes = local_nodes(cluster)
    options = FuzzOptions(
        cases=TYPED_CASES,
        seed=35,
        batch=500,
        concurrency=16,
        case_timeout=5.0,
        health_timeout=30.0,
        rss_limit_mb=512.0,
        findings_dir=tmp_path / "findings",
        strategy="typed",
    )
    summary = asyncio.run(fuzz_nodes(nodes, options))
    assert summary.cases == TYPED_CASES
    assert summary.outcomes["answered"] > TYPED_CASES // 2
    assert (summary.crashes, summary.hangs, summary.tracebacks, summary.mismatches) == (0, 0, 0, 0)
    assert summary.findings == []


def _finding_file(tmp_path: Path, data: bytes) -> Path:
    case = Case(
        case_id=0,
        seed=0,
        node=0,
        api_key=3,
        api_version=9,
        mutators=("length_lie",),
        data=data,
        single=True,
    )
    return save(Finding("crash", 1, "broker", "issue 20", [case]), tmp_path, 1)


def test_replay_sends_a_finding_again(cluster: LocalCluster, tmp_path: Path) -> None:
    path = _finding_file(tmp_path, ISSUE_FRAME)
    bootstrap = cluster.state()["bootstrap"]
    result = CliRunner().invoke(main, ["fuzz", "--replay", str(path), "--bootstrap", bootstrap])
    assert result.exit_code == 0, result.output
    assert "case 0 api 3 v9: closed" in result.output
    assert "not reproduced: the node is well" in result.output


def test_replay_of_a_file_that_is_no_finding_is_bad_input(tmp_path: Path) -> None:
    path = tmp_path / "not-a-finding.json"
    path.write_text(json.dumps({"kind": "crash"}))
    result = CliRunner().invoke(main, ["fuzz", "--replay", str(path), "--bootstrap", "x:1"])
    assert result.exit_code == 2
    assert "is not a fuzz finding" in result.output


def test_auto_creation_through_a_remote_controller_is_answered(cluster: LocalCluster) -> None:
    """Found by the fuzzer: Metadata that auto-creates a topic on a broker whose
    controller is another node got no answer for 10 s and a traceback (the controller
    waited for that broker to pull the new view, over the connection its answer was
    due on), and the broker was fenced meanwhile."""
    client = RawClient(*address(cluster.state()["bootstrap"]))
    try:
        for name in ("auto-created-1", "auto-created-2"):
            response = client.request(
                3,
                12,
                topics=[{"name": name}],
                allow_auto_topic_creation=True,
                include_topic_authorized_operations=False,
            )
            assert response.topics[0].error_code == 0
            assert response.topics[0].partitions
    finally:
        client.close()
    broker_log = Path(cluster.data_dir) / "node-1" / "node.log"
    assert "Traceback" not in broker_log.read_text()
    controller_log = Path(cluster.data_dir) / "node-1001" / "node.log"
    assert "fencing node 1" not in controller_log.read_text()
