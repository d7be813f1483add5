"""The final cluster state, captured after faults are healed and the cluster is quiet:
per partition LSO, high watermark and log start offset (from the final read); the
partitions' open transactions (DescribeProducers) and the coordinators' transactions
(ListTransactions + DescribeTransactions) where the cluster offers KIP-664's APIs —
``None`` for what it does not expose, so the analysis says "unknown" rather than guess.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...rundir.final_state import (
    CoordinatorTransaction,
    FinalPartition,
    FinalState,
    GroupOffset,
    OpenTransaction,
    write_final_state,
)
from ...rundir.run_dir import FINAL_STATE_JSON, HISTORY_DIR
from ..client_security import kafka_python_security, security_config

log = logging.getLogger(__name__)

UNFINISHED_STATES = ("Ongoing", "PrepareCommit", "PrepareAbort", "PrepareEpochFence")


def _admin(bootstrap: str, security: Mapping[str, Any] | None = None) -> Any | None:
    from kafka.admin import KafkaAdminClient

    try:
        return KafkaAdminClient(
            bootstrap_servers=bootstrap.split(","),
            request_timeout_ms=15000,
            **kafka_python_security(security),
        )
    except Exception as exc:
        log.info("no admin client for the final state: %s", exc)
        return None


def open_transactions(
    bootstrap: str,
    partitions: list[FinalPartition],
    security: Mapping[str, Any] | None = None,
) -> list[OpenTransaction] | None:
    """Producers with an open transaction, per partition (DescribeProducers)."""
    from kafka import TopicPartition

    admin = _admin(bootstrap, security)
    if admin is None:
        return None
    try:
        tps = [TopicPartition(p["topic"], p["partition"]) for p in partitions]
        states = admin.describe_producers(tps)
    except Exception as exc:
        log.info("DescribeProducers is not available: %s", exc)
        return None
    finally:
        admin.close()
    out: list[OpenTransaction] = []
    for tp, state in sorted(states.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        for p in state.active_producers:
            if p.current_transaction_start_offset >= 0:
                out.append(
                    {
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "producer_id": p.producer_id,
                        "producer_epoch": p.producer_epoch,
                        "first_offset": p.current_transaction_start_offset,
                        "last_ns": p.last_timestamp * 1_000_000 if p.last_timestamp >= 0 else None,
                    }
                )
    return out


def coordinator_transactions(
    bootstrap: str, security: Mapping[str, Any] | None = None
) -> list[CoordinatorTransaction] | None:
    """Unfinished transactions as the coordinators see them."""
    admin = _admin(bootstrap, security)
    if admin is None:
        return None
    try:
        listed = admin.list_transactions(state_filters=list(UNFINISHED_STATES))
        ids = sorted({t.transactional_id for ts in listed.values() for t in ts})
        described = admin.describe_transactions(ids) if ids else {}
    except Exception as exc:
        log.info("ListTransactions/DescribeTransactions are not available: %s", exc)
        return None
    finally:
        admin.close()
    out: list[CoordinatorTransaction] = []
    for txn_id, d in sorted(described.items()):
        state = getattr(d.state, "value", d.state)
        out.append(
            {
                "transactional_id": txn_id,
                "producer_id": d.producer_id,
                "producer_epoch": d.producer_epoch,
                "state": state,
                "timeout_ms": d.transaction_timeout_ms,
                "start_ns": d.transaction_start_time_ms * 1_000_000
                if d.transaction_start_time_ms >= 0
                else None,
                "partitions": [
                    {"topic": tp.topic, "partition": tp.partition}
                    for tp in sorted(d.topic_partitions)
                ],
            }
        )
    return out


def history_groups(run_dir: Path) -> list[str]:
    """The groups whose offsets the run's users committed (send_offsets, commit_offsets)."""
    groups: set[str] = set()
    for path in sorted((run_dir / HISTORY_DIR).glob("*.jsonl")):
        with path.open(encoding="utf-8") as fh:
            for line in fh:
                if '"group_id"' not in line or "offsets" not in line:
                    continue
                try:
                    op = json.loads(line)
                except ValueError:
                    continue  # a torn last line of a killed process
                if op.get("type") in ("send_offsets", "commit_offsets") and op.get("group_id"):
                    groups.add(str(op["group_id"]))
    return sorted(groups)


def group_offsets(
    bootstrap: str,
    groups: list[str],
    partitions: list[FinalPartition],
    security: Mapping[str, Any] | None = None,
) -> list[GroupOffset] | None:
    """The committed offsets of ``groups`` for ``partitions`` (OffsetFetch through each
    group's coordinator, as a consumer of the group finds it); None if it does not answer."""
    if not groups:
        return []
    from confluent_kafka import Consumer, TopicPartition

    tps = [TopicPartition(p["topic"], p["partition"]) for p in partitions]
    out: list[GroupOffset] = []
    for group in groups:
        consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "enable.auto.commit": False,
                **security_config(security),
            }
        )
        try:
            fetched = consumer.committed(tps, timeout=15)
        except Exception as exc:
            log.info("OffsetFetch of group %s failed: %s", group, exc)
            return None
        finally:
            consumer.close()
        for tp in fetched:
            if tp.error is None and tp.offset >= 0:
                out.append(
                    {
                        "group_id": group,
                        "topic": tp.topic,
                        "partition": tp.partition,
                        "offset": tp.offset,
                    }
                )
    return out


def capture_final_state(
    run_dir: Path,
    bootstrap: str,
    partitions: list[FinalPartition],
    security: Mapping[str, Any] | None = None,
) -> FinalState:
    """Write ``final_state.json`` and return it (``security``: the clients' SASL keys,
    see ``harness.client_security``)."""
    state: FinalState = {
        "captured_ns": time.time_ns(),
        "partitions": partitions,
        "open_transactions": open_transactions(bootstrap, partitions, security) or [],
        "coordinator_transactions": coordinator_transactions(bootstrap, security),
        "group_offsets": group_offsets(bootstrap, history_groups(run_dir), partitions, security),
    }
    write_final_state(run_dir / FINAL_STATE_JSON, state)
    return state
