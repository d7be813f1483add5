"""bench/mutation.py: a mutant is applied to a scratch copy of the cluster that the nodes of
a run really import (a read_committed fetch that drops AbortedTransactions is caught by the
aborted_read checker), and a mutant whose original text is gone is refused, not skipped."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import yaml

BENCH = Path(__file__).resolve().parents[2] / "bench"

#: a short run that aborts often and flushes before aborting, so aborted records reach the
#: log and a reader; no faults
SCENARIO = {
    "name": "mutation-test",
    "seed": 1,
    "duration": 10,
    "cluster": {"launcher": "local", "brokers": 1, "coordinators": 1, "proxied": False},
    "workload": {
        "topics": [{"name": "events", "partitions": 2}],
        "users": [
            {
                "kind": "transactional_producer",
                "name": "writer",
                "topics": ["events"],
                "records_per_txn": 3,
                "partitions_per_txn": 2,
                "abort_probability": 0.5,
                "flush_before_abort_probability": 1.0,
                "rate": 10,
            },
            {"kind": "read_committed_consumer", "name": "reader", "topics": ["events"]},
        ],
    },
    "final": {"quiescence_timeout": 30, "read_timeout": 30},
    "expect": {"verdict": "valid"},
}


def _bench_module(name: str) -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


def test_a_mutant_whose_original_text_is_gone_is_refused(tmp_path: Path) -> None:
    mutation = _bench_module("mutation")
    mutants = _bench_module("mutants")
    gone = mutants.Mutant(
        "gone", "lso_index", "broker/partition.py", "no such line here", "x", "a stale mutant"
    )
    with pytest.raises(mutation.MutantError, match="occurs 0 times in cluster/broker/partition"):
        mutation.apply_mutant(gone, mutation.ROOT / "cluster", tmp_path / "tree")
    assert not (tmp_path / "tree").exists()


def test_every_shipped_mutant_applies_to_this_checkout() -> None:
    mutation = _bench_module("mutation")
    mutants = _bench_module("mutants")
    mutation.check_all([mutants.CANARY, *mutants.MUTANTS], mutation.ROOT / "cluster")
    assert len(mutants.MUTANTS) >= 25
    assert {m.category for m in mutants.MUTANTS} == set(mutants.CATEGORIES)


def test_unknown_mutant_is_refused_with_one_line() -> None:
    r = subprocess.run(
        [sys.executable, str(BENCH / "mutation.py"), "--mutants", "nope"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert r.returncode == 2
    assert r.stderr.strip() == "mutation: unknown mutant(s): nope"


def test_the_nodes_run_the_mutant_and_the_harness_detects_it(tmp_path: Path) -> None:
    scenario = tmp_path / "scenario.yaml"
    scenario.write_text(yaml.safe_dump(SCENARIO))
    out = tmp_path / "out"
    r = subprocess.run(
        [
            sys.executable,
            str(BENCH / "mutation.py"),
            "--mutants",
            "canary-fetch-ignores-aborted-index",
            "--no-canary",
            "--scenarios",
            str(scenario),
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert r.returncode == 0, r.stderr
    cell = json.loads(
        (out / "cells" / "canary-fetch-ignores-aborted-index" / "scenario-seed1.json").read_text()
    )
    assert cell["result"] == "detected", cell
    assert "aborted_read" in cell["checkers"]
    tree = out / "trees" / "canary-fetch-ignores-aborted-index" / "txnchaos" / "cluster"
    assert "if False:" in (tree / "broker" / "partition.py").read_text()


def test_a_node_error_is_a_detection(tmp_path: Path) -> None:
    """A mutant that makes a node raise is seen even when every checker is valid: the
    node_error finding counts as the detecting checker, with the exception's type."""
    mutation = _bench_module("mutation")
    error = {"kind": "node_error", "exception": "txnchaos.cluster.x.CorruptBatch"}
    verdict = {"status": "valid", "checkers": {}, "findings": [error, {"kind": "client_crash"}]}
    (tmp_path / "verdict.json").write_text(json.dumps(verdict))
    assert mutation.judged(tmp_path) == (["node_error"], ["node_error.CorruptBatch"])


def test_a_client_crash_is_counted_apart_from_harness_errors(tmp_path: Path) -> None:
    """A run that exits 1 with every checker valid and a client_crash finding (librdkafka's
    assertion under the network mix) is a client crash, neither a detection nor a harness
    error; without the finding it stays a harness error."""
    mutation = _bench_module("mutation")
    crashed = {"status": "valid", "checkers": {}, "findings": [{"kind": "client_crash"}]}
    (tmp_path / "verdict.json").write_text(json.dumps(crashed))
    assert mutation.client_crashed(tmp_path)
    (tmp_path / "verdict.json").write_text(json.dumps({**crashed, "findings": []}))
    assert not mutation.client_crashed(tmp_path)
    (tmp_path / "verdict.json").write_text("{not json")
    assert not mutation.client_crashed(tmp_path)
    # a client library call that never returned (librdkafka#5456) counts as a crash does
    hung = {**crashed, "findings": [{"kind": "client_hang"}]}
    (tmp_path / "verdict.json").write_text(json.dumps(hung))
    assert mutation.client_crashed(tmp_path)


def test_the_scratch_tree_imports_every_layer_from_this_checkout(tmp_path: Path) -> None:
    """The tree holds the mutated cluster and every other layer of this checkout: a layer
    left out would come from wherever txnchaos is installed (another checkout, say)."""
    mutation = _bench_module("mutation")
    tree = mutation.build_tree(mutation.ROOT / "cluster", tmp_path / "tree")
    code = (
        "import json, txnchaos.cluster, txnchaos.rundir, txnchaos.harness, txnchaos.analysis, "
        "txnchaos.jobs, sys; print(json.dumps({m: sys.modules['txnchaos.' + m].__path__[0] "
        "for m in ('cluster', 'rundir', 'harness', 'analysis', 'jobs')}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={"PYTHONPATH": str(tree), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    paths = json.loads(out)
    for layer in ("cluster", "rundir", "harness", "analysis", "jobs"):
        assert Path(paths[layer]) == tree / "txnchaos" / layer, layer  # found in the tree
        if layer != "cluster":  # ... as a link to this checkout's
            assert Path(paths[layer]).resolve() == (mutation.ROOT / layer).resolve(), layer
