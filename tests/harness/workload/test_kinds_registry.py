"""The user-kind registry is the one place a kind is registered: every per-kind lookup (the
workload config's union and prefixes, the workers, the scenario's crash checks, the nemesis's
crash targets, the locust user bases) is derived from it, and no other harness module names a
kind."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from txnchaos.harness.run.scenario import ScenarioError, parse_scenario
from txnchaos.harness.workload.config import WorkloadConfigError, load_workload
from txnchaos.harness.workload.crashable import HOLDS
from txnchaos.harness.workload.kinds.registry import (
    KINDS,
    crash_faults,
    crash_targets,
    user_kind,
)
from txnchaos.harness.workload.workers import NameAllocator, Worker, WorkerContext, make_worker

HARNESS = Path(__file__).resolve().parents[3] / "harness"
KIND_NAMES = [k.name for k in KINDS]
TOPICS = [{"name": "in", "partitions": 2}, {"name": "out", "partitions": 2}]


def entry(kind: str) -> dict[str, Any]:
    """A minimal valid ``users:`` entry of ``kind`` (its spec's required topic fields)."""
    fields = user_kind(kind).spec.model_fields
    out: dict[str, Any] = {"kind": kind}
    if "topics" in fields:
        out["topics"] = ["in"]
    if "input_topics" in fields:
        out |= {"input_topics": ["in"], "output_topic": "out"}
    return out


def test_entries_are_consistent() -> None:
    assert len(set(KIND_NAMES)) == len(KINDS)
    assert len({k.prefix for k in KINDS}) == len(KINDS)
    assert len({k.locust_user for k in KINDS}) == len(KINDS)
    for k in KINDS:
        assert issubclass(k.worker, Worker)
        assert set(k.crash_holds.values()) <= set(HOLDS) - {"none"}


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_every_kind_validates_and_makes_its_worker(kind: str, tmp_path: Path) -> None:
    cfg = load_workload({"topics": TOPICS, "users": [entry(kind)]})
    (spec,) = cfg.users
    assert type(spec) is user_kind(kind).spec
    assert cfg.process_prefix(spec) == user_kind(kind).prefix
    ctx = WorkerContext(config=cfg, run_dir=tmp_path, bootstrap="127.0.0.1:1")
    worker = make_worker(spec, ctx, NameAllocator(tmp_path))
    try:
        assert type(worker) is user_kind(kind).worker
        assert worker.process == f"{user_kind(kind).prefix}-0"
    finally:
        worker.writer.close()


def test_unknown_kind_lists_every_registered_kind() -> None:
    with pytest.raises(WorkloadConfigError) as ei:
        load_workload({"topics": TOPICS, "users": [{"kind": "nope"}]})
    expected = ", ".join(f"'{name}'" for name in KIND_NAMES)
    assert f"does not match any of the expected tags: {expected}" in str(ei.value)


@pytest.mark.parametrize("fault", crash_faults())
def test_crash_faults_need_a_kind_that_takes_them(fault: str) -> None:
    takers = [kind for kind, _ in crash_targets(fault)]
    assert takers
    for kind in takers:
        parse_scenario(
            {
                "name": "x",
                "workload": {"topics": TOPICS, "users": [entry(kind)]},
                "nemesis": {"actions": [{"at": 1, "kind": fault}]},
            }
        )
    others = [k for k in KIND_NAMES if k not in takers]
    with pytest.raises(ScenarioError, match=f"{fault} needs a .*{takers[-1]} user"):
        parse_scenario(
            {
                "name": "x",
                "workload": {"topics": TOPICS, "users": [entry(k) for k in others]},
                "nemesis": {"actions": [{"at": 1, "kind": fault}]},
            }
        )


def test_locust_user_bases_come_from_the_entries() -> None:
    code = (
        "import json, sys\n"
        "from txnchaos.harness.workload.users import user_classes\n"
        "from txnchaos.harness.workload.config import load_workload\n"
        "cfg = load_workload(json.loads(sys.argv[1]))\n"
        "print(json.dumps([[c.spec.kind, c.__mro__[1].__name__] for c in user_classes(cfg)]))\n"
    )
    workload = {
        "topics": TOPICS,
        "users": [entry(k) | {"name": f"u{i}"} for i, k in enumerate(KIND_NAMES)],
    }
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(workload)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    ).stdout
    assert json.loads(out) == [[k.name, k.locust_user] for k in KINDS]


def test_registry_does_not_import_locust() -> None:
    """The orchestrator (which reads the registry) must stay free of gevent's patching."""
    code = (
        "import sys\n"
        "import txnchaos.harness.run.orchestrator, txnchaos.harness.workload.kinds.registry\n"
        "print('locust' in sys.modules, 'gevent' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120
    ).stdout
    assert out.split() == ["False", "False"]


def test_no_module_outside_the_kinds_names_a_kind() -> None:
    """A kind's name as a string literal outside ``workload/kinds/`` is a table to keep in
    step by hand: there must be none."""
    kinds_dir = HARNESS / "workload" / "kinds"
    found = []
    for path in sorted(HARNESS.rglob("*.py")):
        if kinds_dir in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Constant) and node.value in KIND_NAMES:
                found.append(f"{path.relative_to(HARNESS)}:{node.lineno}: {node.value!r}")
    assert found == []
