"""The history a transactional producer client records, whichever client library it drives.

:class:`RecordingProducer` writes the INIT, BEGIN, SEND, SEND_OFFSETS, COMMIT and ABORT ops
and decides their outcomes; a client library plugs in its calls (``_call_*``), the producer
id and epoch it knows (:meth:`~RecordingProducer.producer_ids`) and the translation of its
errors into :class:`Failure` (:meth:`~RecordingProducer.translate_error`). So the
confluent-kafka client (:mod:`.clients`) and our own (:mod:`.ours`) record identical ops.

Outcome rules (Jepsen's ok / fail / info), by the error's :class:`ErrorClass`:

* init: ``info`` when retriable (a timed-out InitProducerId may have bumped the epoch), else
  ``fail``; either way the producer must be recreated (:class:`ProducerReset`).
* begin: ``fail``; a fatal error resets the producer.
* send_offsets: ``info`` when retriable (the offsets may be in the transaction), else
  ``fail``; the transaction must then be aborted, or the producer reset when fatal.
* commit: ``ok``; ``fail`` when the error requires an abort (the transaction did not commit;
  the abort is then recorded as its own op); a retriable error is retried up to ``retries``
  times inside the same op (none once the run stops its users) and is ``info`` if none
  settles it; any other error is ``info`` (EndTxn may have reached the coordinator) and the
  producer must be recreated.
* abort: ``ok``; retriable errors retried (not once the run stops its users); otherwise
  ``info`` and the producer is reset.
* any of init, send_offsets, commit, abort that a client library's watchdog gave up on
  (:class:`CallHung`: the call never returned, e.g. librdkafka#5456): ``info`` (its effect is
  unknown), never retried; the hung client is abandoned and the producer reset (the next
  instance's InitProducerId fences it), and ``on_hang`` reports it (a ``client_hang``
  finding).
"""

from __future__ import annotations

import collections
import enum
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from ...rundir.schema import EventType, Outcome
from ...rundir.writer import HistoryWriter, Op

#: ``reporter(request_type, name, response_time_ms, exception)``; called from the greenlet.
Reporter = Callable[[str, str, float, BaseException | None], None]

PAD_HEADER = "txnchaos-pad"
#: locust's name for the sends an abort the workload chose purged (never sent, as asked)
PURGED_BY_ABORT = "send (purged by a deliberate abort)"


def no_report(_rt: str, _name: str, _ms: float, _exc: BaseException | None) -> None:
    return None


def ms_since(ns: int) -> float:
    return (time.time_ns() - ns) / 1e6


# -- errors ----------------------------------------------------------------------------------


class ErrorClass(enum.StrEnum):
    """What an error means for the caller (the history's outcome follows from it)."""

    FATAL = "fatal"
    ABORTABLE = "abortable"
    RETRIABLE = "retriable"
    OTHER = "other"


@dataclass(frozen=True)
class Failure:
    """A client library's error as the history sees it."""

    error_class: ErrorClass
    #: The op's ``error`` field (``NAME (class): message``).
    text: str | None


class ClientError(RuntimeError):
    """A client operation failed; ``error_class`` says what the caller must do next."""

    def __init__(self, what: str, failure: Failure, cause: BaseException | None = None) -> None:
        super().__init__(f"{what}: {failure.text if failure.text is not None else cause}")
        self.failure = failure
        self.error_class = failure.error_class


class ProducerReset(ClientError):
    """The producer is unusable (fatal error, or an in-doubt commit/abort): recreate it."""


class CallHung(Exception):
    """A blocking client call outlived its own timeout and the watchdog's grace: the caller
    stopped waiting for it (the call may still be running on the thread it was given, and may
    still take effect). Raised by a client library's ``_call_*``; the client that made it is
    unusable from then on (its handle is abandoned, never closed)."""

    def __init__(self, call: str, timeout_s: float, waited_s: float, detail: str) -> None:
        super().__init__(
            f"{call}(timeout={timeout_s:g} s) did not return after {waited_s:.1f} s: {detail}"
        )
        self.call = call
        self.timeout_s = timeout_s
        self.waited_s = waited_s
        self.detail = detail


#: ``on_hang(op, hang)``: a watchdog gave up on the call of ``op`` (called once, from the
#: greenlet or thread that made the call, after the op is completed ``info``).
HangReporter = Callable[[Op, CallHung], None]


# -- locust event queue -----------------------------------------------------------------------


@dataclass(frozen=True)
class _Event:
    request_type: str
    name: str
    ms: float
    exc: BaseException | None


class EventQueue:
    """Results produced on pool threads, reported later from the greenlet."""

    def __init__(self, reporter: Reporter) -> None:
        self.reporter = reporter
        self._q: collections.deque[_Event] = collections.deque()

    def put(self, request_type: str, name: str, ms: float, exc: BaseException | None) -> None:
        self._q.append(_Event(request_type, name, ms, exc))

    def drain(self) -> None:
        while True:
            try:
                e = self._q.popleft()
            except IndexError:
                return
            self.reporter(e.request_type, e.name, e.ms, e.exc)


class OperationFailed(Exception):
    """Exception object handed to locust for a failed or unknown operation."""


# -- the recording producer -------------------------------------------------------------------


class RecordingProducer(ABC):
    """A producer that records every operation; subclasses drive one client library."""

    def __init__(
        self,
        writer: HistoryWriter,
        *,
        transactional_id: str | None,
        reporter: Reporter | None,
        request_type: str,
        padding_bytes: int,
        group_id: str | None,
        stopping: Callable[[], bool] | None = None,
    ) -> None:
        self.writer = writer
        #: The run is stopping its users: retriable commit/abort errors are not retried.
        self.stopping = stopping or (lambda: False)
        # A copier's producer: its ops carry the consumer group, so the analysis can
        # tie outputs to the group whose offsets commit with them.
        self.group_id = group_id
        self.events = EventQueue(reporter or no_report)
        self.request_type = request_type
        self.transactional_id = transactional_id
        self._pad = b"\0" * padding_bytes if padding_bytes else None
        self.initialized = False
        self.open_txn: int | None = None
        #: A delivery report said the open transaction must be aborted.
        self.txn_abortable = False
        #: A fatal error was reported: the producer must be recreated.
        self.fatal = False
        self.unacked = 0
        #: An abort the workload chose (``abort_probability``) is under way: the sends it
        #: purges are what the scenario asked for, not failures (locust reports them under
        #: their own name, :data:`PURGED_BY_ABORT`, as successes; the history keeps ``fail``).
        self.aborting_on_purpose = False
        #: Told of every call a watchdog gave up on (the run's ``client-hangs/`` records).
        self.on_hang: HangReporter | None = None

    # -- what a client library supplies ---------------------------------------------------

    @abstractmethod
    def translate_error(self, exc: BaseException) -> Failure | None:
        """``exc`` as a :class:`Failure`; None when it is not this library's client error
        (it then propagates unrecorded)."""

    @abstractmethod
    def producer_ids(self) -> dict[str, Any]:
        """``producer_id`` / ``producer_epoch`` when they are known for certain, else {}."""

    def ids_may_change(self) -> None:  # noqa: B027 (a hook most libraries need not fill)
        """An operation that may change the producer id or epoch is starting."""

    @abstractmethod
    def _call_init(self, timeout_s: float) -> None: ...

    @abstractmethod
    def _call_begin(self) -> None: ...

    @abstractmethod
    def _call_send_offsets(self, offsets: list[Any], group_metadata: Any, timeout_s: float) -> None:
        """``offsets`` are confluent-kafka TopicPartitions (what the copier's consumer gives)."""

    @abstractmethod
    def _call_commit(self, timeout_s: float) -> None: ...

    @abstractmethod
    def _call_abort(self, timeout_s: float) -> None: ...

    def _drain(self) -> None:
        """Report the queued locust events (and whatever else a library queues)."""
        self.events.drain()

    @abstractmethod
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
        """Produce one record (SEND op, completed by its acknowledgement)."""

    @abstractmethod
    def poll(self, timeout_s: float = 0.0) -> None:
        """Record the acknowledgements that arrived."""

    @abstractmethod
    def flush(self, timeout_s: float) -> int:
        """Wait for every outstanding acknowledgement; returns how many are still pending."""

    @abstractmethod
    def close(self, *, abort_open: bool = False, timeout_s: float = 10.0) -> None:
        """Release the producer; an open transaction stays open unless ``abort_open``."""

    # -- plumbing -------------------------------------------------------------------------

    def id_fields(self) -> dict[str, Any]:
        """transactional_id (and group_id), and producer_id/epoch when known."""
        out: dict[str, Any] = {"transactional_id": self.transactional_id}
        if self.group_id is not None:
            out["group_id"] = self.group_id
        out.update(self.producer_ids())
        return out

    def _failure(self, exc: BaseException) -> Failure:
        failure = self.translate_error(exc)
        if failure is None:
            raise exc
        return failure

    def _report(self, name: str, started_ns: int, outcome: Outcome, error: str | None) -> None:
        exc = None if outcome == Outcome.OK else OperationFailed(f"{outcome.value}: {error}")
        self.events.put(self.request_type, name, ms_since(started_ns), exc)

    def _finish(
        self, op: Op, name: str, outcome: Outcome, error: str | None = None, **fields: Any
    ) -> None:
        self.writer.complete(op, outcome, error=error, **{**self.id_fields(), **fields})
        self._report(name, op.invoke_ns, outcome, error)
        self._drain()

    def _reset(self, what: str, failure: Failure, cause: BaseException) -> ProducerReset:
        self.fatal = True
        return ProducerReset(what, failure, cause)

    def _hung(self, op: Op, name: str, hang: CallHung) -> ProducerReset:
        """The watchdog gave up on ``op``'s call: complete it ``info`` (its effect unknown),
        report the hang and hand back the reset the caller raises (the hung client is not to
        be used again; the next instance fences it)."""
        self.ids_may_change()
        text = f"client hang: {hang}"
        self._finish(op, name, Outcome.INFO, text)
        self.open_txn = None
        self.txn_abortable = False
        if self.on_hang is not None:
            self.on_hang(op, hang)
        return self._reset(hang.call, Failure(ErrorClass.FATAL, text), hang)

    def _invoke_send(
        self,
        topic: str,
        partition: int,
        value: str,
        key: str | None,
        txn: int | None,
        source: str | None,
    ) -> tuple[Op, dict[str, Any]]:
        """The SEND invocation of one record, and its history item."""
        item: dict[str, Any] = {"topic": topic, "partition": partition, "value": value, "key": key}
        if source is not None:
            item["source"] = source
        op = self.writer.invoke(EventType.SEND, items=[item], txn=txn, **self.id_fields())
        return op, item

    def _send_rejected(self, op: Op, failure: Failure, cause: BaseException) -> NoReturn:
        """The client refused a record outright: it was never sent."""
        self._finish(op, "send", Outcome.FAIL, failure.text)
        if failure.error_class == ErrorClass.FATAL:
            raise self._reset("produce", failure, cause) from cause
        raise ClientError("produce", failure, cause) from cause

    def _record_ack(
        self, op: Op, outcome: Outcome, error: str | None, items: list[dict[str, Any]] | None
    ) -> None:
        """Complete a SEND with its acknowledgement (``items``: the acked offset)."""
        self.writer.complete(op, outcome, items=items, error=error, **self.id_fields())
        if outcome != Outcome.OK and self.aborting_on_purpose:
            self.events.put(self.request_type, PURGED_BY_ABORT, ms_since(op.invoke_ns), None)
            return
        self._report("send", op.invoke_ns, outcome, error)

    # -- transactional API ----------------------------------------------------------------

    def init(self, timeout_s: float) -> Outcome:
        """init_transactions (INIT op). Raises :class:`ProducerReset` on failure."""
        self.ids_may_change()
        op = self.writer.invoke(EventType.INIT, transactional_id=self.transactional_id)
        try:
            self._call_init(timeout_s)
        except CallHung as e:
            raise self._hung(op, "init", e) from e
        except Exception as e:
            failure = self._failure(e)
            retriable = failure.error_class == ErrorClass.RETRIABLE
            self._finish(op, "init", Outcome.INFO if retriable else Outcome.FAIL, failure.text)
            raise self._reset("init_transactions", failure, e) from e
        self.initialized = True
        self._finish(op, "init", Outcome.OK)
        return Outcome.OK

    def begin(self, txn: int) -> None:
        op = self.writer.invoke(EventType.BEGIN, txn=txn, **self.id_fields())
        try:
            self._call_begin()
        except Exception as e:
            failure = self._failure(e)
            self._finish(op, "begin", Outcome.FAIL, failure.text)
            if failure.error_class == ErrorClass.FATAL:
                raise self._reset("begin_transaction", failure, e) from e
            raise ClientError("begin_transaction", failure, e) from e
        self.open_txn = txn
        self.txn_abortable = False
        self._finish(op, "begin", Outcome.OK)

    def send_offsets(
        self,
        txn: int,
        offsets: list[Any],
        group_metadata: Any,
        group_id: str | None,
        timeout_s: float,
    ) -> None:
        """send_offsets_to_transaction (SEND_OFFSETS op); raises :class:`ClientError`.
        ``offsets`` are confluent-kafka TopicPartitions, ``group_metadata`` the consumer's."""
        items = [
            {"topic": tp.topic, "partition": tp.partition, "offset": tp.offset} for tp in offsets
        ]
        fields = {**self.id_fields(), "group_id": group_id}
        op = self.writer.invoke(EventType.SEND_OFFSETS, items=items, txn=txn, **fields)
        try:
            self._call_send_offsets(offsets, group_metadata, timeout_s)
        except CallHung as e:
            raise self._hung(op, "send_offsets", e) from e
        except Exception as e:
            failure = self._failure(e)
            # Retriable (timeout): the offsets may or may not be in the transaction.
            retriable = failure.error_class == ErrorClass.RETRIABLE
            outcome = Outcome.INFO if retriable else Outcome.FAIL
            self._finish(op, "send_offsets", outcome, failure.text)
            if failure.error_class == ErrorClass.FATAL:
                raise self._reset("send_offsets_to_transaction", failure, e) from e
            self.txn_abortable = True  # do not commit a transaction with unknown offsets
            raise ClientError("send_offsets_to_transaction", failure, e) from e
        self._finish(op, "send_offsets", Outcome.OK)

    def commit(self, txn: int, timeout_s: float, retries: int) -> Outcome:
        """commit_transaction (COMMIT op); on an abortable error aborts (ABORT op) and returns
        ``fail``.  Raises :class:`ProducerReset` when the outcome stays unknown."""
        op = self.writer.invoke(EventType.COMMIT, txn=txn, **self.id_fields())
        attempt = 0
        while True:
            try:
                self._call_commit(timeout_s)
            except CallHung as e:
                raise self._hung(op, "commit", e) from e
            except Exception as e:
                failure = self._failure(e)
                if failure.error_class == ErrorClass.ABORTABLE:
                    self._finish(op, "commit", Outcome.FAIL, failure.text)
                    self.abort(txn, timeout_s, retries)
                    return Outcome.FAIL
                if self._retry(failure, attempt, retries):
                    attempt += 1
                    continue
                self.ids_may_change()
                self._finish(op, "commit", Outcome.INFO, failure.text)
                self.open_txn = None
                raise self._reset("commit_transaction", failure, e) from e
            self.open_txn = None
            self._finish(op, "commit", Outcome.OK)
            return Outcome.OK

    def _retry(self, failure: Failure, attempt: int, retries: int) -> bool:
        """Retry a commit or abort: a retriable error, retries left, the run not stopping."""
        return (
            failure.error_class == ErrorClass.RETRIABLE
            and attempt < retries
            and not self.stopping()
        )

    def abort(
        self, txn: int, timeout_s: float, retries: int, *, on_purpose: bool = False
    ) -> Outcome:
        """abort_transaction (ABORT op).  Raises :class:`ProducerReset` if it cannot settle.
        ``on_purpose``: the workload chose to abort (the sends it purges are no failures)."""
        self.ids_may_change()  # KIP-360: an abort after an error may bump the epoch
        op = self.writer.invoke(EventType.ABORT, txn=txn, **self.id_fields())
        self.aborting_on_purpose = on_purpose  # until its purged sends are reported (_finish)
        try:
            return self._abort(op, txn, timeout_s, retries)
        finally:
            self.aborting_on_purpose = False

    def _abort(self, op: Op, txn: int, timeout_s: float, retries: int) -> Outcome:
        attempt = 0
        while True:
            try:
                self._call_abort(timeout_s)
            except CallHung as e:
                raise self._hung(op, "abort", e) from e
            except Exception as e:
                failure = self._failure(e)
                if self._retry(failure, attempt, retries):
                    attempt += 1
                    continue
                self._finish(op, "abort", Outcome.INFO, failure.text)
                self.open_txn = None
                raise self._reset("abort_transaction", failure, e) from e
            self.open_txn = None
            self.txn_abortable = False
            self._finish(op, "abort", Outcome.OK)
            return Outcome.OK
