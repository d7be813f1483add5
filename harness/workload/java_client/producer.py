"""A recording producer on the official Java client (kafka-clients in a :class:`JavaProcess`).

:class:`JavaProducerClient` is a :class:`~..recording.RecordingProducer`: the INIT, BEGIN, SEND,
SEND_OFFSETS, COMMIT and ABORT ops, and their outcomes, are decided by the same code as for the
confluent-kafka client and ours, so every checker judges its runs alike. The Java side only
executes each call; the producer id and epoch come with every answer (exact: read from the
client's transaction manager). A send is not answered: its ack arrives later and completes the
SEND op when the user next talks to its process (a flush before commit records every ack before
the COMMIT invocation).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from ....rundir.schema import Outcome
from ....rundir.writer import HistoryWriter, Op
from ..recording import ClientError, ErrorClass, Failure, RecordingProducer, Reporter
from .lines import Field, ids
from .process import JavaCallError, JavaProcess, JavaProcessError

#: Extra seconds a call may take beyond the client's own bound (max.block.ms).
CALL_MARGIN_S = 30.0


def failure_of(exc: BaseException) -> Failure | None:
    """A Java call's error as the history sees it; a dead or hung JVM is fatal (the client
    must be recreated; what it was doing is unknown)."""
    if isinstance(exc, JavaCallError):
        return exc.error.failure
    if isinstance(exc, JavaProcessError):
        return Failure(ErrorClass.FATAL, f"JavaProcessError (fatal): {exc}")
    return None


class JavaProducerClient(RecordingProducer):
    """A KafkaProducer in ``process``, recording every operation."""

    def __init__(
        self,
        process: JavaProcess,
        props: Mapping[str, str],
        writer: HistoryWriter,
        *,
        call_timeout_s: float,
        reporter: Reporter | None = None,
        request_type: str = "java-txn",
        padding_bytes: int = 0,
        group_id: str | None = None,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        super().__init__(
            writer,
            transactional_id=props.get("transactional.id"),
            reporter=reporter,
            request_type=request_type,
            padding_bytes=padding_bytes,
            group_id=group_id,
            stopping=stopping,
        )
        self.process = process
        self.call_timeout_s = call_timeout_s
        self._ids: tuple[int, int] | None = None
        self._pending: dict[int, tuple[Op, dict[str, Any]]] = {}
        process.on_ack = self._on_ack
        self._call("producer", *(f"{k}={v}" for k, v in props.items()))
        self.open = True

    # -- plumbing ---------------------------------------------------------------------------

    def _call(self, name: str, *fields: Field, timeout_s: float | None = None) -> dict[str, Any]:
        wait = (timeout_s if timeout_s is not None else self.call_timeout_s) + CALL_MARGIN_S
        try:
            answer = self.process.request(name, *fields, timeout_s=wait)
        except JavaCallError as e:
            self._ids = ids(e.answer) or self._ids
            raise
        finally:
            self.events.drain()
        self._ids = ids(answer) or self._ids
        return answer

    def ids_may_change(self) -> None:
        self._ids = None

    def producer_ids(self) -> dict[str, Any]:
        if self._ids is None:
            return {}
        return {"producer_id": self._ids[0], "producer_epoch": self._ids[1]}

    def translate_error(self, exc: BaseException) -> Failure | None:
        return failure_of(exc)

    def _call_init(self, timeout_s: float) -> None:
        self._call("init", False, timeout_s=timeout_s)

    def _call_begin(self) -> None:
        self._call("begin")

    def _call_send_offsets(self, offsets: list[Any], group_metadata: Any, timeout_s: float) -> None:
        """The offsets go with the group metadata of the consumer in the same process (the
        copier's); ``group_metadata`` only names the group when there is none."""
        triples: list[Field] = []
        for tp in offsets:
            triples += [tp.topic, tp.partition, tp.offset]
        self._call("offsets", self.group_id or str(group_metadata), *triples, timeout_s=timeout_s)

    def _call_commit(self, timeout_s: float) -> None:
        self._call("commit", timeout_s=timeout_s)

    def _call_abort(self, timeout_s: float) -> None:
        self._call("abort", timeout_s=timeout_s)

    # -- records ----------------------------------------------------------------------------

    def send(
        self,
        topic: str,
        partition: int,
        value: str,
        *,
        key: str | None = None,
        txn: int | None = None,
        source: str | None = None,
    ) -> Op:
        """Produce one record (SEND op, completed by its ack)."""
        op, item = self._invoke_send(topic, partition, value, key, txn, source)
        pad = len(self._pad) if self._pad else 0
        try:
            seq = self.process.post("send", topic, partition, key, value, pad)
        except JavaProcessError as e:
            failure = failure_of(e)
            assert failure is not None
            self._send_rejected(op, failure, e)
        self._pending[seq] = (op, item)
        self.unacked += 1
        return op

    def _on_ack(self, msg: dict[str, Any]) -> None:
        entry = self._pending.pop(msg["ack"], None)
        if entry is None:
            return  # the ack of a producer this process had before (reset)
        op, item = entry
        self.unacked -= 1
        error = msg.get("error")
        if error is None:
            offset = msg["offset"]
            done = {**item, "offset": offset if offset >= 0 else None}
            self._record_ack(op, Outcome.OK, None, [done])
            return
        failure = error.failure
        if self.open_txn is not None or failure.error_class != ErrorClass.RETRIABLE:
            self.txn_abortable = True
        if failure.error_class == ErrorClass.FATAL:
            self.fatal = True
        outcome = Outcome.INFO if msg["sent"] else Outcome.FAIL
        self._record_ack(op, outcome, failure.text, None)

    def poll(self, timeout_s: float = 0.0) -> None:
        """Record the acks that arrived."""
        try:
            self.process.drain()
        except JavaProcessError:
            self.fatal = True
        self.events.drain()

    def flush(self, timeout_s: float) -> int:
        with contextlib.suppress(JavaCallError, JavaProcessError):
            self._call("flush", timeout_s=timeout_s)
        return max(len(self._pending), 0)

    def close(self, *, abort_open: bool = False, timeout_s: float = 10.0) -> None:
        """Release the producer; an open transaction stays open unless ``abort_open`` (the
        Java producer aborts one when closed with a timeout, so it is closed without)."""
        if not self.open:
            return
        try:
            if abort_open and self.open_txn is not None and self.initialized:
                with contextlib.suppress(ClientError):
                    self.abort(self.open_txn, timeout_s, 0)
            wait_ms = 0 if self.open_txn is not None else int(timeout_s * 1000)
            if self.process.alive:
                self._call("close_producer", wait_ms, timeout_s=timeout_s)
        except (JavaCallError, JavaProcessError):
            pass
        finally:
            self.open = False
            self._unrecorded_sends()
            self.events.drain()

    def _unrecorded_sends(self) -> None:
        """Sends never acked stay invocations without completion (unknown), as in a crash."""
        self._pending.clear()
        if self.process.on_ack == self._on_ack:
            self.process.on_ack = _ignore_ack


def _ignore_ack(_msg: dict[str, Any]) -> None:
    return None
