"""Scripted stand-ins for confluent-kafka's Producer and our own, for unit tests of the
history logic.

Neither is a model of Kafka: each acks every produced record with increasing offsets when
delivery reports are served (poll/flush/commit), purges unsent records on abort (as librdkafka
does) and raises the errors a test scripts for each method, in order.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from txnchaos.harness.clients import AbortableError, RecordMetadata
from txnchaos.harness.clients.producer_state import ProducerIdAndEpoch


def kerr(
    code: int, *, fatal: bool = False, retriable: bool = False, abortable: bool = False
) -> KafkaException:
    return KafkaException(
        KafkaError(code, "scripted", fatal=fatal, retriable=retriable, txn_requires_abort=abortable)
    )


class FakeMsg:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._t, self._p, self._o = topic, partition, offset

    def topic(self) -> str:
        return self._t

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeProducer:
    instances: list[FakeProducer] = []

    def __init__(self, conf: dict[str, Any]) -> None:
        self.conf = conf
        self.script: dict[str, list[BaseException | None]] = defaultdict(list)
        self.pending: list[tuple[str, int, Callable[..., None]]] = []
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.calls: list[str] = []
        #: Error given to the next served delivery reports (None: acked).
        self.delivery_error: KafkaError | None = None
        self.stats: dict[str, Any] | None = None
        FakeProducer.instances.append(self)

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if self.script[name]:
            exc = self.script[name].pop(0)
            if exc is not None:
                raise exc

    def _serve_stats(self) -> None:
        if self.stats is not None and "stats_cb" in self.conf:
            self.conf["stats_cb"](json.dumps(self.stats))

    def _serve(self) -> int:
        self._serve_stats()
        pending, self.pending = self.pending, []
        for topic, p, cb in pending:
            if self.delivery_error is not None:
                cb(self.delivery_error, FakeMsg(topic, p, -1))
            else:
                off = self.offsets[(topic, p)]
                self.offsets[(topic, p)] += 1
                cb(None, FakeMsg(topic, p, off))
        return len(pending)

    def init_transactions(self, timeout: float) -> None:
        self._step("init_transactions")

    def begin_transaction(self) -> None:
        self._step("begin_transaction")

    def produce(self, topic: str, *, partition: int, on_delivery: Any, **_kw: Any) -> None:
        self._step("produce")
        self.pending.append((topic, partition, on_delivery))

    def poll(self, timeout: float = 0) -> int:
        # Acks are only served by flush/commit here: a poll(0) right after produce() finds
        # nothing in librdkafka's queue either, and the tests need deterministic purges.
        self._serve_stats()
        return 0

    def flush(self, timeout: float = 0) -> int:
        self._serve()
        return 0

    def send_offsets_to_transaction(self, offsets: Any, meta: Any, timeout: float) -> None:
        self._step("send_offsets_to_transaction")

    def commit_transaction(self, timeout: float) -> None:
        self._serve()
        self._step("commit_transaction")

    def abort_transaction(self, timeout: float) -> None:
        pending, self.pending = self.pending, []
        for topic, p, cb in pending:
            cb(KafkaError(KafkaError._PURGE_QUEUE, "purged"), FakeMsg(topic, p, -1))
        self._step("abort_transaction")

    def close(self) -> None:
        self.calls.append("close")


class FakeOurProducer:
    """The same script for our own producer's interface (``harness/clients.Producer``): its
    calls are coroutines, a send returns a future, and errors are our client's exceptions."""

    def __init__(self, config: Any) -> None:
        self.config = config
        self.script: dict[str, list[BaseException | None]] = defaultdict(list)
        self.pending: list[tuple[str, int, asyncio.Future[RecordMetadata]]] = []
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.calls: list[str] = []
        self.ids = ProducerIdAndEpoch(7, 0)

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if self.script[name]:
            exc = self.script[name].pop(0)
            if exc is not None:
                raise exc

    async def _serve(self) -> None:
        pending, self.pending = self.pending, []
        for topic, p, fut in pending:
            off = self.offsets[(topic, p)]
            self.offsets[(topic, p)] += 1
            fut.set_result(RecordMetadata(topic, p, off))
        await asyncio.sleep(0)  # let the futures' callbacks run before the call returns

    async def init_transactions(self, timeout_s: float) -> None:
        self._step("init_transactions")

    async def begin_transaction(self) -> None:
        self._step("begin_transaction")

    def send(
        self, topic: str, partition: int, value: bytes | None, **_kw: Any
    ) -> asyncio.Future[RecordMetadata]:
        self._step("produce")
        fut: asyncio.Future[RecordMetadata] = asyncio.get_running_loop().create_future()
        self.pending.append((topic, partition, fut))
        return fut

    async def flush(self, timeout_s: float) -> None:
        await self._serve()

    async def send_offsets_to_transaction(self, offsets: Any, group: Any, timeout_s: float) -> None:
        self._step("send_offsets_to_transaction")

    async def commit_transaction(self, timeout_s: float) -> None:
        await self._serve()
        self._step("commit_transaction")

    async def abort_transaction(self, timeout_s: float) -> None:
        pending, self.pending = self.pending, []
        for _topic, _p, fut in pending:
            fut.set_exception(AbortableError("purged by the abort"))
        await asyncio.sleep(0)
        self._step("abort_transaction")

    async def close(self, timeout_s: float) -> None:
        self.calls.append("close")
