"""Workload config validation: every error names the field that is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from txnchaos.harness.workload.config import WorkloadConfigError, load_workload
from txnchaos.harness.workload.kinds.eos_copier import EOSCopierSpec
from txnchaos.harness.workload.kinds.read_committed_consumer import ReadCommittedConsumerSpec
from txnchaos.harness.workload.kinds.transactional_producer import TransactionalProducerSpec


def base(**users: Any) -> dict[str, Any]:
    return {
        "topics": [{"name": "in", "partitions": 3}, {"name": "out", "partitions": 2}],
        "users": [users] if users else [],
    }


def error(data: Any) -> str:
    with pytest.raises(WorkloadConfigError) as ei:
        load_workload(data)
    return str(ei.value)


def test_full_config_parses_with_defaults() -> None:
    cfg = load_workload(
        {
            "topics": [{"name": "in", "partitions": 3}, {"name": "out"}],
            "client_config": {"socket.timeout.ms": 10000},
            "users": [
                {"kind": "transactional_producer", "topics": ["in"], "count": 2},
                {"kind": "idempotent_producer", "topics": ["in", "out"], "rate": 5},
                {"kind": "read_committed_consumer", "topics": ["in"], "mode": "assign"},
                {"kind": "eos_copier", "input_topics": ["in"], "output_topic": "out"},
            ],
        }
    )
    tp = cfg.users[0]
    assert isinstance(tp, TransactionalProducerSpec)
    assert (tp.records_per_txn, tp.partitions_per_txn, tp.transaction_timeout_ms) == (10, 2, 60000)
    assert isinstance(cfg.users[2], ReadCommittedConsumerSpec)
    assert isinstance(cfg.users[3], EOSCopierSpec)
    assert cfg.partitions("out") == 3
    assert cfg.client_overrides(cfg.users[1]) == {"socket.timeout.ms": 10000}


@pytest.mark.parametrize(
    ("user", "field", "words"),
    [
        (
            {"kind": "transactional_producer", "topics": ["in"], "abort_probability": 1.5},
            "users.0.transactional_producer.abort_probability",
            "less than or equal to 1",
        ),
        (
            {"kind": "transactional_producer", "topics": ["in"], "abort_probabilty": 0.1},
            "users.0.transactional_producer.abort_probabilty",
            "Extra inputs are not permitted",
        ),
        (
            {"kind": "transactional_producer", "topics": ["in"], "records_per_txn": 0},
            "users.0.transactional_producer.records_per_txn",
            "greater than or equal to 1",
        ),
        (
            {"kind": "transactional_producer", "topics": []},
            "users.0.transactional_producer.topics",
            "at least 1",
        ),
        (
            {"kind": "read_committed_consumer", "topics": ["in"], "mode": "bogus"},
            "users.0.read_committed_consumer.mode",
            "'subscribe' or 'assign'",
        ),
        (
            {"kind": "eos_copier", "input_topics": ["in"], "output_topic": "in"},
            "users.0.eos_copier",
            "must not be one of input_topics",
        ),
        (
            {"kind": "dual_writer", "topics": ["in"], "transaction_timeout_ms": 60000},
            "users.0.dual_writer",
            "transaction_timeout_ms cannot be set on a dual_writer",
        ),
        ({"kind": "nonsense", "topics": ["in"]}, "users.0", "does not match any of the expected"),
        (
            {"kind": "idempotent_producer", "topics": ["in"], "name": "bad|name"},
            "users.0.idempotent_producer.name",
            "should match pattern",
        ),
    ],
)
def test_field_errors_name_the_field(user: dict[str, Any], field: str, words: str) -> None:
    msg = error(base(**user))
    assert field in msg, msg
    assert words in msg, msg


def test_cross_checks_name_the_field() -> None:
    msg = error(base(kind="transactional_producer", topics=["missing"]))
    assert "users.0 (transactional_producer).topics" in msg and "'missing'" in msg
    msg = error(base(kind="transactional_producer", topics=["out"], partitions_per_txn=3))
    assert "partitions_per_txn" in msg and "exceeds the 2 partitions" in msg
    msg = error(base(kind="eos_copier", input_topics=["in"], output_topic="nowhere"))
    assert "output_topic" in msg and "'nowhere'" in msg
    dup = base()
    dup["users"] = [
        {"kind": "idempotent_producer", "topics": ["in"]},
        {"kind": "idempotent_producer", "topics": ["out"]},
    ]
    msg = error(dup)
    assert "users.1 (idempotent_producer).name" in msg and "users.0" in msg
    msg = error({"topics": [{"name": "a"}, {"name": "a"}]})
    assert "duplicate topic names ['a']" in msg
    assert "topics" in error({"topics": []})
    assert "topics.0.partitions" in error({"topics": [{"name": "a", "partitions": 0}]})
    assert "expected a mapping" in error(["not", "a", "mapping"])


def test_several_errors_are_all_listed() -> None:
    data = base(kind="transactional_producer", topics=["in"], count=-1, abort_probability=2)
    msg = error(data)
    assert "count" in msg and "abort_probability" in msg
