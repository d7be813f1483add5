"""Create the workload's topics before users start (idempotent: existing topics are fine)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .config import TopicSpec


class TopicSetupError(RuntimeError):
    pass


def ensure_topics(
    bootstrap: str,
    topics: Iterable[TopicSpec],
    timeout_s: float = 60.0,
    security: Mapping[str, Any] | None = None,
) -> None:
    """Create every topic with ``create`` set; a topic that already exists is accepted
    (``security``: the clients' SASL keys, see ``harness.client_security``).

    Waits on the futures by polling ``done()`` so that it also behaves under gevent's
    monkey-patching (the admin client completes futures from its own native thread).
    """
    wanted = [t for t in topics if t.create]
    if not wanted:
        return
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    futures = admin.create_topics(
        [NewTopic(t.name, t.partitions, t.replication_factor, config=t.configs) for t in wanted],
        operation_timeout=timeout_s,
        request_timeout=timeout_s,
    )
    deadline = time.monotonic() + timeout_s
    for name, fut in futures.items():
        while not fut.done():
            if time.monotonic() > deadline:
                raise TopicSetupError(f"creating topic {name!r} timed out after {timeout_s}s")
            time.sleep(0.05)
        try:
            fut.result(0)
        except KafkaException as e:
            err = e.args[0] if e.args else None
            if isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS:
                continue
            raise TopicSetupError(f"creating topic {name!r} failed: {e}") from e
