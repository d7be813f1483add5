"""Thin confluent-kafka wrappers that record every operation in the history.

Three concerns are kept apart:

* **Where blocking calls run** (:class:`Executor`).  Under locust (gevent) a blocking librdkafka
  call (flush, commit_transaction, consume, ...) would freeze every user, so
  :class:`GeventExecutor` runs it in gevent's native thread pool and parks only the calling
  greenlet.  Outside gevent (the crashable subprocess, the final read) :class:`DirectExecutor`
  just calls it.
* **What is recorded** (:class:`~txnchaos.rundir.writer.HistoryWriter`): an
  ``invoke`` line before the call and a ``complete`` line after it, with the outcome classified
  from the :class:`KafkaError` (:func:`classify`).  Delivery reports arrive on the thread that
  serves the client (inside flush/poll); the writer is thread-safe, so they are recorded there.
* **When the harness stops waiting** (:meth:`Executor.run_bounded`): librdkafka's blocking
  transactional calls (init_transactions, send_offsets_to_transaction, commit_transaction,
  abort_transaction) take a timeout, but one of them may never return (librdkafka#5456:
  send_offsets_to_transaction blocks for as long as the group coordinator cannot be reached,
  its timeout never checked).  A call still running :data:`HANG_GRACE_S` after its own
  timeout is given up on (:class:`~.recording.CallHung`): the thread it runs on is left
  blocked, the producer is abandoned (kept referenced, never flushed or closed: both would
  block on the same handle) and the user goes on with a new instance.
* **What is reported to locust** (:data:`Reporter`): request events must be fired from the
  greenlet, never from a pool thread, so results are queued (:class:`EventQueue`) and the
  greenlet drains the queue after every blocking call.

Outcome rules (Jepsen's ok / fail / info): the transactional ops follow
:mod:`.recording` (shared with our own client, :mod:`.ours`); a send is ``ok`` with the acked
offset; ``fail`` when librdkafka says the record was never sent (purged from the queue) or a
broker rejected it with a non-retriable error; ``info`` otherwise (timed out, purged in flight,
retries exhausted: it may be in the log).

Producer id and epoch: librdkafka does not expose them through the API, so they are taken from
its statistics JSON (``eos.producer_id`` / ``eos.producer_epoch``, every
``statistics.interval.ms``).  A snapshot is only used when it was taken after the last
operation that can change them (init, abort, a fatal or abortable error), so a recorded epoch is
never a stale one; until then they are left out.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
    libversion,
)

from ...rundir.schema import EventType, Isolation, Outcome
from ...rundir.writer import HistoryWriter, Op
from .recording import (
    PAD_HEADER,
    CallHung,
    ClientError,
    ErrorClass,
    EventQueue,
    Failure,
    OperationFailed,
    ProducerReset,
    RecordingProducer,
    Reporter,
    ms_since,
    no_report,
)

log = logging.getLogger(__name__)

T = TypeVar("T")

#: How long after its own timeout a blocking transactional call of librdkafka is still waited
#: for before the watchdog gives up on it (seconds).  librdkafka returns from these calls at
#: their timeout, give or take a request it already sent (its retry backoff and the socket's
#: round trip: well under a second on a local cluster); 15 s more is far beyond that, so a
#: call still running then is taken for hung (librdkafka#5456: send_offsets_to_transaction
#: never times out while the group coordinator cannot be reached), and short enough that a
#: 30 s call given up at 45 s leaves a user time to go on within locust's stop timeout.
HANG_GRACE_S = 15.0
#: The librdkafka bug a hang is most likely (named in the op's error and the finding).
HANG_ISSUE = "librdkafka#5456"

# -- executors ------------------------------------------------------------------------------


class CallStillRunning(Exception):
    """:meth:`Executor.run_bounded`: the call has run ``waited_s`` seconds, past its limit,
    and is left running on its thread."""

    def __init__(self, waited_s: float) -> None:
        super().__init__(f"still running after {waited_s:.1f} s")
        self.waited_s = waited_s


class Executor(Protocol):
    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...

    def run_bounded(self, limit_s: float, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)``, waited for at most ``limit_s`` seconds from when it starts running;
        raises :class:`CallStillRunning` (the call left running on its thread) after that."""
        ...


class _Started:
    """When a call handed to another thread started running (monotonic seconds), so its
    limit counts from then and not from a wait for a free thread."""

    def __init__(self) -> None:
        self.at: float | None = None

    def wrap(self, fn: Callable[..., T]) -> Callable[..., T]:
        def call(*args: Any) -> T:
            self.at = time.monotonic()
            return fn(*args)

        return call


class DirectExecutor:
    """Runs the call on the current thread (no gevent); a bounded call runs on a thread of its
    own (a daemon: a call given up on never holds the process's exit)."""

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return fn(*args, **kwargs)

    def run_bounded(self, limit_s: float, fn: Callable[..., T], *args: Any) -> T:
        result: list[T] = []
        error: list[BaseException] = []
        started = _Started()
        call = started.wrap(fn)

        def body() -> None:
            try:
                result.append(call(*args))
            except BaseException as e:  # handed to the caller below
                error.append(e)

        thread = threading.Thread(target=body, name=f"bounded {fn.__name__}", daemon=True)
        thread.start()
        thread.join(limit_s)
        if thread.is_alive():
            raise CallStillRunning(time.monotonic() - (started.at or time.monotonic()))
        if error:
            raise error[0]
        return result[0]


class GeventExecutor:
    """Runs blocking calls in gevent's hub thread pool; only the calling greenlet waits.

    The pool's ``maxsize`` is raised to at least ``min_threads`` (one thread per concurrently
    blocked user; the default pool of 10 would serialise a larger workload).
    """

    def __init__(self, min_threads: int = 64) -> None:
        import gevent

        self._gevent = gevent
        # gevent takes SystemError for a system error and throws it into the main greenlet
        # (ending the workload) even when the caller handles it; librdkafka's binding raises
        # one from a fenced producer's calls (run_client_call), which the callers handle
        from gevent.hub import Hub

        Hub.SYSTEM_ERROR = tuple(e for e in Hub.SYSTEM_ERROR if e is not SystemError)
        pool = gevent.get_hub().threadpool
        if pool.maxsize < min_threads:
            pool.maxsize = min_threads

    def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        return self._gevent.get_hub().threadpool.apply(fn, args, kwargs)

    def run_bounded(self, limit_s: float, fn: Callable[..., T], *args: Any) -> T:
        """The call in a pool thread; the greenlet stops waiting ``limit_s`` after it started
        (a call still queued for a thread is waited for).  A call given up on keeps its thread
        for as long as it blocks, so the pool grows by one to keep the others' threads."""
        pool = self._gevent.get_hub().threadpool
        started = _Started()
        pending = pool.spawn(started.wrap(fn), *args)
        while True:
            if started.at is None:
                left = max(limit_s, 0.1)
            else:
                left = started.at + limit_s - time.monotonic()
            if left > 0:
                try:
                    return pending.get(timeout=left)
                except self._gevent.Timeout:
                    continue
            if started.at is None:
                continue  # still waiting for a thread: its limit has not begun
            pool.maxsize += 1
            raise CallStillRunning(time.monotonic() - started.at)


# -- errors ----------------------------------------------------------------------------------


def kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0]
    return None


def run_client_call(
    executor: Executor,
    fn: Callable[..., T],
    *args: Any,
    limit_s: float | None = None,
    **kwargs: Any,
) -> T:
    """``executor.run(fn, ...)``, with librdkafka's error as the error: when a call fails
    (a fatal error, e.g. fenced) and librdkafka then serves a callback (statistics) before
    returning, the binding runs the callback with the KafkaException still set and the
    callback's first C call raises ``SystemError`` ("returned a result with an exception
    set") caused by it; the KafkaException is what the call raised. When the callback's
    error was cleared instead, the call raises SystemError without a cause ("returned NULL
    without setting an exception"): a fatal KafkaException, as the producer is unusable.

    ``limit_s``: run it with :meth:`Executor.run_bounded` (no ``kwargs`` then), which raises
    :class:`CallStillRunning` once the call has run that long."""
    try:
        if limit_s is not None:
            return executor.run_bounded(limit_s, fn, *args)
        return executor.run(fn, *args, **kwargs)
    except SystemError as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, KafkaException):
            raise cause from None
        # the binding's other face of the same state: the call "returned NULL without setting
        # an exception" (the callback's error was cleared); the producer is unusable: fatal
        raise KafkaException(
            KafkaError(KafkaError._FATAL, f"librdkafka binding: {exc}", fatal=True)
        ) from exc


#: CPython's PyErr_Occurred through ctypes' PyDLL, which raises the error indicator's exception
#: when it is set after the call: a pending exception surfaces here, whoever set it.
_RAISE_PENDING = ctypes.pythonapi.PyErr_Occurred
_RAISE_PENDING.restype = ctypes.c_void_p
_RAISE_PENDING.argtypes = []


def absorb_binding_error() -> None:
    """The first statement of a callback that takes a lock. The binding may serve a
    callback while the call that served it has its KafkaException set (see
    :func:`run_client_call`): a call into C the callback makes then raises SystemError after
    that call did its work. Were that call a lock's ``__enter__``, the lock would be taken
    and the ``with`` never entered, so never released, and every later delivery report would
    wait for it for good (a copier's flush hung so in a nightly run). The pending exception
    is raised and dropped here instead; the outer call then fails as fatal, as when
    ``_on_stats`` skips its snapshot. (Not a plain builtin call: CPython 3.11 specialises
    those and skips the check.)"""
    # not contextlib.suppress: making one is itself a call, before its guard is in place
    try:  # noqa: SIM105
        _RAISE_PENDING()
    except Exception:  # the served call's own error: that call reports it
        pass


def classify(err: KafkaError | None) -> ErrorClass:
    """Fatal beats abortable beats retriable (librdkafka's own precedence)."""
    if err is None:
        return ErrorClass.OTHER
    if err.fatal():
        return ErrorClass.FATAL
    if err.txn_requires_abort():
        return ErrorClass.ABORTABLE
    if err.retriable():
        return ErrorClass.RETRIABLE
    return ErrorClass.OTHER


def error_name(err: KafkaError | BaseException | None) -> str | None:
    if err is None:
        return None
    if isinstance(err, BaseException):
        ke = kafka_error(err)
        if ke is None:
            return f"{type(err).__name__}: {err}"
        err = ke
    name = err.name() or str(err.code())
    return f"{name} ({classify(err).value}): {err.str()}"


#: Local error code for which librdkafka guarantees the record was never sent.
_NEVER_SENT = frozenset({KafkaError._PURGE_QUEUE})


def send_outcome(err: KafkaError) -> Outcome:
    """Outcome of a failed delivery report (see the module docstring)."""
    code = err.code()
    if code in _NEVER_SENT:
        return Outcome.FAIL
    if code > 0 and not err.retriable():
        return Outcome.FAIL
    return Outcome.INFO


def kafka_failure(err: KafkaError | None) -> Failure:
    """A librdkafka error as the history sees it."""
    return Failure(classify(err), error_name(err))


# -- producer ---------------------------------------------------------------------------------

#: Producer handles abandoned after a hung call (:meth:`ProducerClient.abandon`), kept for the
#: process's lifetime: destroying one would free what the blocked thread still uses.
_ABANDONED: list[Any] = []
_ABANDONED_LOCK = threading.Lock()


def abandoned_producers() -> int:
    """How many producer handles this process abandoned after a hung call."""
    with _ABANDONED_LOCK:
        return len(_ABANDONED)


@dataclass
class _Stats:
    producer_id: int | None = None
    producer_epoch: int | None = None
    txn_state: str | None = None
    taken_ns: int = 0


class ProducerClient(RecordingProducer):
    """A confluent-kafka Producer (idempotent, optionally transactional) that records ops.

    ``conf`` is the full librdkafka configuration; ``transactional.id`` in it makes the client
    transactional.  Every public method reports its queued locust events before it returns.
    """

    def __init__(
        self,
        conf: Mapping[str, Any],
        writer: HistoryWriter,
        *,
        executor: Executor | None = None,
        reporter: Reporter | None = None,
        request_type: str = "txn",
        padding_bytes: int = 0,
        producer_factory: Callable[[dict[str, Any]], Any] = Producer,
        group_id: str | None = None,
        stopping: Callable[[], bool] | None = None,
        hang_grace_s: float = HANG_GRACE_S,
    ) -> None:
        super().__init__(
            writer,
            transactional_id=conf.get("transactional.id"),
            reporter=reporter,
            request_type=request_type,
            padding_bytes=padding_bytes,
            group_id=group_id,
            stopping=stopping,
        )
        self.executor: Executor = executor or DirectExecutor()
        self._conf = dict(conf)
        if self._conf.get("statistics.interval.ms"):
            self._conf["stats_cb"] = self._on_stats
        self._factory = producer_factory
        self._stats = _Stats()
        self._stats_lock = threading.Lock()
        self._ids_valid_after_ns = time.time_ns()
        self.producer: Any = self._factory(self._conf)
        self._unacked_lock = threading.Lock()
        #: A call on the handle hung (:meth:`abandon`): nothing is called on it again.
        self.abandoned = False
        self.hang_grace_s = hang_grace_s

    # -- identity ---------------------------------------------------------------------------

    def _on_stats(self, raw: str) -> None:
        try:
            eos = json.loads(raw).get("eos") or {}
        except ValueError:
            return
        except SystemError:
            # served while the call that served it has a KafkaException set (see
            # run_client_call): skip this snapshot; raising would leave the binding a crashed
            # callback that it raises again, in place of the call's own error
            return
        pid = eos.get("producer_id")
        with self._stats_lock:
            self._stats = _Stats(
                producer_id=pid if isinstance(pid, int) and pid >= 0 else None,
                producer_epoch=eos.get("producer_epoch"),
                txn_state=eos.get("txn_state"),
                taken_ns=time.time_ns(),
            )

    def ids_may_change(self) -> None:
        with self._stats_lock:
            self._ids_valid_after_ns = time.time_ns()

    def producer_ids(self) -> dict[str, Any]:
        """From a statistics snapshot taken after the last op that could change them."""
        out: dict[str, Any] = {}
        with self._stats_lock:
            s = self._stats
            if s.producer_id is not None and s.taken_ns > self._ids_valid_after_ns:
                out["producer_id"] = s.producer_id
                if isinstance(s.producer_epoch, int) and s.producer_epoch >= 0:
                    out["producer_epoch"] = s.producer_epoch
        return out

    # -- plumbing ---------------------------------------------------------------------------

    def translate_error(self, exc: BaseException) -> Failure | None:
        if not isinstance(exc, KafkaException):
            return None
        return kafka_failure(kafka_error(exc))

    def _run(self, fn: Callable[..., T], *args: Any) -> T:
        try:
            return run_client_call(self.executor, fn, *args)
        finally:
            self.events.drain()

    def _run_watched(self, call: str, timeout_s: float, fn: Callable[..., T], *args: Any) -> T:
        """A blocking transactional call taking ``timeout_s``, given up on ``hang_grace_s``
        (:data:`HANG_GRACE_S`) after that (:class:`~.recording.CallHung`; the producer is then
        abandoned)."""
        try:
            limit_s = timeout_s + self.hang_grace_s
            return run_client_call(self.executor, fn, *args, limit_s=limit_s)
        except CallStillRunning as e:
            self.abandon()
            issue = HANG_ISSUE if call == "send_offsets_to_transaction" else f"as {HANG_ISSUE}"
            detail = (
                f"librdkafka {libversion()[0]} never returned from a call whose timeout had "
                f"passed ({issue}); the producer is abandoned and replaced"
            )
            raise CallHung(call, timeout_s, e.waited_s, detail) from None
        finally:
            self.events.drain()

    def abandon(self) -> None:
        """Stop using the producer without flushing or closing it (either would block behind
        the hung call): the handle is kept referenced for the rest of the process, so it is
        never destroyed under the thread still blocked in it."""
        if self.producer is not None and not self.abandoned:
            self.abandoned = True
            with _ABANDONED_LOCK:
                _ABANDONED.append(self.producer)

    def _call_init(self, timeout_s: float) -> None:
        self._run_watched(
            "init_transactions", timeout_s, self.producer.init_transactions, timeout_s
        )

    def _call_begin(self) -> None:
        self.producer.begin_transaction()  # client-local, never blocks

    def _call_send_offsets(self, offsets: list[Any], group_metadata: Any, timeout_s: float) -> None:
        self._run_watched(
            "send_offsets_to_transaction",
            timeout_s,
            self.producer.send_offsets_to_transaction,
            offsets,
            group_metadata,
            timeout_s,
        )

    def _call_commit(self, timeout_s: float) -> None:
        self._run_watched(
            "commit_transaction", timeout_s, self.producer.commit_transaction, timeout_s
        )

    def _call_abort(self, timeout_s: float) -> None:
        self._run_watched(
            "abort_transaction", timeout_s, self.producer.abort_transaction, timeout_s
        )

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
        """Produce one record (SEND op, completed by its delivery report)."""
        op, item = self._invoke_send(topic, partition, value, key, txn, source)
        headers = [(PAD_HEADER, self._pad)] if self._pad else None

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            absorb_binding_error()
            self._on_delivery(op, item, err, msg)

        while True:
            try:
                self.producer.produce(
                    topic,
                    value=value.encode(),
                    key=key.encode() if key is not None else None,
                    partition=partition,
                    headers=headers,
                    on_delivery=on_delivery,
                )
                break
            except BufferError:
                # Local queue full: serve delivery reports off the loop, then retry.
                self._run(self.producer.poll, 0.1)
            except KafkaException as e:
                failure = kafka_failure(kafka_error(e))
                if failure.error_class == ErrorClass.ABORTABLE:
                    self.txn_abortable = True
                self._send_rejected(op, failure, e)
        with self._unacked_lock:
            self.unacked += 1
        return op

    def _on_delivery(
        self, op: Op, item: dict[str, Any], err: KafkaError | None, msg: Message
    ) -> None:
        # Runs on whichever thread serves the producer (a pool thread under gevent).
        with self._unacked_lock:
            self.unacked -= 1
        if err is None:
            off = msg.offset()
            done = {**item, "offset": off if off is not None and off >= 0 else None}
            self._record_ack(op, Outcome.OK, None, [done])
            return
        if classify(err) in (ErrorClass.ABORTABLE, ErrorClass.FATAL):
            self.txn_abortable = True
            self.fatal = self.fatal or classify(err) == ErrorClass.FATAL
            self.ids_may_change()
        self._record_ack(op, send_outcome(err), error_name(err), None)

    def poll(self, timeout_s: float = 0.0) -> None:
        """Serve delivery reports and statistics."""
        self._run(self.producer.poll, timeout_s)

    def flush(self, timeout_s: float) -> int:
        """Wait for every outstanding delivery report; returns how many are still pending."""
        return int(self._run(self.producer.flush, timeout_s))

    def close(self, *, abort_open: bool = False, timeout_s: float = 10.0) -> None:
        """Flush and release the producer.

        An open transaction is left open (the coordinator aborts it after
        transaction.timeout.ms, or the next producer with this transactional.id fences it)
        unless ``abort_open``: Producer.close() would abort it, so it is not called then.
        """
        if self.producer is None:
            return
        if self.abandoned:
            # a call on it never returned: flush and close would block behind it (the handle
            # stays referenced in _ABANDONED)
            self.producer = None
            self.events.drain()
            return
        try:
            if abort_open and self.open_txn is not None and self.initialized:
                with contextlib.suppress(ClientError):
                    self.abort(self.open_txn, timeout_s, 0)
                if self.abandoned:  # the abort hung: nothing more is called on the handle
                    return
            # bounded: with a transaction librdkafka still takes for open (an abort that
            # failed), close() aborts it and waits for as long as the coordinator does not
            # answer (seen in a nightly run); given up on, the handle is abandoned
            limit_s = timeout_s + self.hang_grace_s
            run_client_call(self.executor, self.producer.flush, timeout_s, limit_s=limit_s)
            if self.open_txn is None:
                run_client_call(self.executor, self.producer.close, limit_s=limit_s)
        except CallStillRunning as e:
            log.warning("closing %s: a call still ran after %.1f s; abandoned", self, e.waited_s)
            self.abandon()
        except (KafkaException, RuntimeError):
            pass
        finally:
            # Dropping the last reference destroys the handle without an EndTxn.
            self.producer = None
            self.events.drain()


# -- consumer ---------------------------------------------------------------------------------


def _decode(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="replace")


def record_items(msgs: Iterable[Message]) -> tuple[list[dict[str, Any]], list[str]]:
    """History items for the records of a consume() batch, and the errors it carried."""
    items: list[dict[str, Any]] = []
    errors: list[str] = []
    for m in msgs:
        err = m.error()
        if err is not None:
            if err.code() != KafkaError._PARTITION_EOF:
                errors.append(error_name(err) or "")
            continue
        items.append(
            {
                "topic": m.topic(),
                "partition": m.partition(),
                "offset": m.offset(),
                "value": _decode(m.value()),
                "key": _decode(m.key()),
            }
        )
    return items, errors


def _tp_items(parts: Iterable[TopicPartition], with_offset: bool = True) -> list[dict[str, Any]]:
    out = []
    for tp in parts:
        it: dict[str, Any] = {"topic": tp.topic, "partition": tp.partition}
        if with_offset and tp.offset is not None and tp.offset >= 0:
            it["offset"] = tp.offset
        out.append(it)
    return out


class ConsumerClient:
    """A confluent-kafka Consumer that records polls, assignments, seeks and commits."""

    def __init__(
        self,
        conf: Mapping[str, Any],
        writer: HistoryWriter,
        *,
        executor: Executor | None = None,
        reporter: Reporter | None = None,
        request_type: str = "consumer",
        event_type: EventType = EventType.POLL,
        consumer_factory: Callable[[dict[str, Any]], Any] = Consumer,
    ) -> None:
        self.writer = writer
        self.executor: Executor = executor or DirectExecutor()
        self.events = EventQueue(reporter or no_report)
        self.request_type = request_type
        self.event_type = event_type
        self.group_id: str | None = conf.get("group.id")
        self.isolation = str(conf.get("isolation.level", Isolation.READ_COMMITTED.value))
        self.consumer: Any = consumer_factory(dict(conf))
        #: Called (on the serving thread) after a revoke is recorded, e.g. to drop state.
        self.on_revoked: Callable[[list[TopicPartition]], None] | None = None
        self.on_assigned: Callable[[list[TopicPartition]], None] | None = None
        #: Partition-EOF events of the last poll (``enable.partition.eof``): topic, partition,
        #: offset reached.
        self.eof: list[tuple[str, int, int]] = []

    def _run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        try:
            return run_client_call(self.executor, fn, *args, **kwargs)
        finally:
            self.events.drain()

    def _fields(self) -> dict[str, Any]:
        return {"group_id": self.group_id}

    # -- rebalance callbacks (run inside consume(), on the serving thread) --------------------

    def _cb_assign(self, consumer: Any, parts: list[TopicPartition]) -> None:
        self.writer.record(EventType.ASSIGN, items=_tp_items(parts), **self._fields())
        self.events.put(self.request_type, "assign", 0.0, None)
        if self.on_assigned:
            self.on_assigned(parts)

    def _cb_revoke(self, consumer: Any, parts: list[TopicPartition]) -> None:
        self.writer.record(
            EventType.REVOKE, items=_tp_items(parts, with_offset=False), **self._fields()
        )
        self.events.put(self.request_type, "revoke", 0.0, None)
        if self.on_revoked:
            self.on_revoked(parts)

    def _cb_lost(self, consumer: Any, parts: list[TopicPartition]) -> None:
        self.writer.record(
            EventType.REVOKE,
            Outcome.INFO,
            items=_tp_items(parts, with_offset=False),
            error="partitions lost",
            **self._fields(),
        )
        if self.on_revoked:
            self.on_revoked(parts)

    # -- API ------------------------------------------------------------------------------

    def subscribe(self, topics: list[str]) -> None:
        self.consumer.subscribe(
            topics, on_assign=self._cb_assign, on_revoke=self._cb_revoke, on_lost=self._cb_lost
        )

    def assign(self, parts: list[TopicPartition]) -> None:
        """Explicit assignment (ASSIGN op with the starting offsets)."""
        self.consumer.assign(parts)
        self.writer.record(EventType.ASSIGN, items=_tp_items(parts), **self._fields())

    def seek(self, parts: list[TopicPartition]) -> None:
        for tp in parts:
            self._run(self.consumer.seek, tp)
        self.writer.record(EventType.SEEK, items=_tp_items(parts), **self._fields())

    def watermarks(self, topic: str, partition: int, timeout_s: float) -> tuple[int, int]:
        res = self._run(
            self.consumer.get_watermark_offsets, TopicPartition(topic, partition), timeout_s
        )
        if res is None:
            raise ClientError(
                f"get_watermark_offsets {topic}/{partition}", kafka_failure(None), TimeoutError()
            )
        return int(res[0]), int(res[1])

    def poll(self, max_records: int, timeout_s: float) -> list[Message]:
        """consume() (one POLL op with the records returned, in order)."""
        invoke_ns = time.time_ns()
        try:
            msgs = self._run(self.consumer.consume, max_records, timeout_s)
        except (KafkaException, RuntimeError) as e:
            err = kafka_error(e)
            self.writer.record(
                self.event_type,
                Outcome.FAIL,
                invoke_ns=invoke_ns,
                error=error_name(err or e),
                isolation=self.isolation,
                **self._fields(),
            )
            self.events.put(self.request_type, "poll", ms_since(invoke_ns), e)
            self.events.drain()
            raise ClientError("consume", kafka_failure(err), e) from e
        items, errors = record_items(msgs)
        self.eof = [
            (m.topic(), m.partition(), m.offset())
            for m in msgs
            if m.error() is not None and m.error().code() == KafkaError._PARTITION_EOF
        ]
        self.writer.record(
            self.event_type,
            Outcome.OK,
            invoke_ns=invoke_ns,
            items=items,
            error="; ".join(errors) if errors else None,
            isolation=self.isolation,
            **self._fields(),
        )
        self.events.put(self.request_type, "poll", ms_since(invoke_ns), None)
        self.events.drain()
        return [m for m in msgs if m.error() is None]

    def commit(self, offsets: list[TopicPartition]) -> Outcome:
        """Synchronous offset commit (COMMIT_OFFSETS op)."""
        op = self.writer.invoke(
            EventType.COMMIT_OFFSETS, items=_tp_items(offsets), **self._fields()
        )
        try:
            self._run(self.consumer.commit, offsets=offsets, asynchronous=False)
        except KafkaException as e:
            err = kafka_error(e)
            outcome = Outcome.INFO if classify(err) == ErrorClass.RETRIABLE else Outcome.FAIL
            self.writer.complete(op, outcome, error=error_name(err))
            self.events.put(self.request_type, "commit", ms_since(op.invoke_ns), e)
            self.events.drain()
            return outcome
        self.writer.complete(op, Outcome.OK)
        self.events.put(self.request_type, "commit", ms_since(op.invoke_ns), None)
        self.events.drain()
        return Outcome.OK

    def group_metadata(self) -> Any:
        return self.consumer.consumer_group_metadata()

    def positions(self, parts: list[TopicPartition]) -> list[TopicPartition]:
        return list(self._run(self.consumer.position, parts))

    def close(self) -> None:
        if self.consumer is None:
            return
        try:
            self._run(self.consumer.close)
        except (KafkaException, RuntimeError):
            pass
        finally:
            self.consumer = None
            self.events.drain()


def position(m: Message) -> tuple[str, int, int]:
    """Topic, partition and offset of a consumed record (the client types them as optional:
    they are None only on error events, which never reach here)."""
    topic, partition, offset = m.topic(), m.partition(), m.offset()
    assert topic is not None and partition is not None and offset is not None
    return topic, partition, offset


def next_offsets(msgs: Iterable[Message]) -> list[TopicPartition]:
    """Per partition, the offset after the last record of ``msgs`` (what to commit)."""
    last: dict[tuple[str, int], int] = {}
    for m in msgs:
        topic, partition, offset = position(m)
        last[(topic, partition)] = offset + 1
    return [TopicPartition(t, p, o) for (t, p), o in sorted(last.items())]


def first_offsets(msgs: Iterable[Message]) -> list[TopicPartition]:
    """Per partition, the first offset of ``msgs`` (where to rewind after an abort)."""
    first: dict[tuple[str, int], int] = {}
    for m in msgs:
        topic, partition, offset = position(m)
        first.setdefault((topic, partition), offset)
    return [TopicPartition(t, p, o) for (t, p), o in sorted(first.items())]


def chance(rng: random.Random, p: float) -> bool:
    return p > 0 and rng.random() < p


__all__ = [
    "HANG_GRACE_S",
    "HANG_ISSUE",
    "OFFSET_BEGINNING",
    "PAD_HEADER",
    "CallHung",
    "CallStillRunning",
    "ClientError",
    "ConsumerClient",
    "DirectExecutor",
    "ErrorClass",
    "EventQueue",
    "Executor",
    "Failure",
    "GeventExecutor",
    "OperationFailed",
    "ProducerClient",
    "ProducerReset",
    "Reporter",
    "abandoned_producers",
    "chance",
    "classify",
    "error_name",
    "first_offsets",
    "kafka_error",
    "kafka_failure",
    "next_offsets",
    "record_items",
    "send_outcome",
]
