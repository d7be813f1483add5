"""The dual_writer kind against real nodes (KIP-939 enabled): its normal recipe, a crash after
the database commit whose first recovery is killed too, and a crash after prepare; then the
database and the final read_committed read agree, judged by every reference checker."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import start_cluster
from txnchaos.analysis.reference import judge
from txnchaos.harness.launch.local import LocalCluster
from txnchaos.harness.workload.config import load_workload
from txnchaos.harness.workload.crash import CrashableClient
from txnchaos.harness.workload.dual_write.capture import capture_databases
from txnchaos.harness.workload.dual_write.recovery_client import RecoveryClient
from txnchaos.harness.workload.final_read import final_read
from txnchaos.harness.workload.kinds.dual_writer import DualWriterWorker
from txnchaos.harness.workload.topics import ensure_topics
from txnchaos.harness.workload.workers import WorkerContext
from txnchaos.rundir.compact import compact_run
from txnchaos.rundir.dual_write_db import read_dual_write_db
from txnchaos.rundir.run_dir import write_run_info

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TOPIC = "orders"


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    cluster: LocalCluster = start_cluster(
        tmp_path_factory.mktemp("dual-write"),
        brokers=1,
        settings=["transaction.two.phase.commit.enable=true", "transaction.version=2"],
    )
    yield str(cluster.state()["bootstrap"])
    cluster.down()


def _crash(config: Any, run: Path, bootstrap: str, hold: str, kill_recovery: bool) -> str:
    """Crash a writer at ``hold``, recover it (killing a first recovery if asked)."""
    writer = CrashableClient(config, 0, run, bootstrap, hold=hold, hold_after=1, seed=3)
    writer.start()
    line = writer.wait_hold()
    writer.kill()
    fields = dict(part.split("=", 1) for part in line.split()[1:])

    def recovery(hold_in_recovery: bool) -> RecoveryClient:
        return RecoveryClient(
            config,
            0,
            run,
            bootstrap,
            writer=writer.process,
            txn=int(fields["txn"]),
            transactional_id=fields["transactional_id"],
            hold_in_recovery=hold_in_recovery,
        )

    if kill_recovery:
        first = recovery(True)
        first.start(60)
        assert first.wait_hold(60).startswith("HOLD in-recovery ongoing=")
        first.kill()
    return recovery(False).run(60)


def test_dual_writer_recipe_crashes_and_recovery(bootstrap: str, tmp_path: Path) -> None:
    run = tmp_path / "run"
    config = load_workload(
        {
            "topics": [{"name": TOPIC, "partitions": 2}],
            "users": [
                {
                    "kind": "dual_writer",
                    "topics": [TOPIC],
                    "records_per_txn": 3,
                    "partitions_per_txn": 2,
                    "abort_probability": 0.3,
                    "transaction_version": 2,
                }
            ],
        }
    )
    ensure_topics(bootstrap, config.topics)
    worker = DualWriterWorker(
        config.users[0], WorkerContext(config, run, bootstrap, seed=5), "dual-writer-0", 0
    )
    worker.start()
    for _ in range(6):
        worker.step()
    # a transaction begun and sent, never prepared, when the user stops: a 2PC transaction
    # never times out, so the stop must end it (else the final read stops at its LSO)
    assert worker.db is not None and worker.client is not None
    open_txn = worker.next_txn
    worker.next_txn += 1
    worker.db.begin()
    worker.client.begin(open_txn)
    worker.send_all(open_txn)
    worker.stop()

    assert _crash(config, run, bootstrap, "after-db-commit", kill_recovery=True) == "committed"
    assert _crash(config, run, bootstrap, "after-prepare", kill_recovery=False) == "aborted"

    capture_databases(run, config)
    assert final_read(bootstrap, {TOPIC: 2}, run, timeout_s=60).complete
    write_run_info(run, scenario="dual-writer-test", seed=5, complete=True)

    db = read_dual_write_db(run)
    assert db is not None
    rows = db["databases"][0]["rows"]
    by_writer = {r["writer"] for r in rows}
    # the normal writer committed some transactions; the first crashed writer's held one
    # (committed in the database before the crash) was committed by its recovery
    assert {"dual-writer-0", "dual-writer-1"} <= by_writer
    assert any(r["writer"] == "dual-writer-1" and r["txn"] == 1 for r in rows)
    # the second crashed writer's held transaction never reached the database
    assert not any(r["writer"] == "dual-writer-2" and r["txn"] == 1 for r in rows)

    compact_run(run)  # as the harness does once a run ends
    verdict = judge(run)
    assert verdict["dual_write"].unknown is None
    assert verdict["dual_write"].checked["transactions"] >= 8
    anomalies = {name: j.rows for name, j in verdict.items() if j.rows}
    assert anomalies == {}
