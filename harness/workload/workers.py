"""What every user kind's worker shares, independent of locust (the workers themselves live
in their kind's module, :mod:`.kinds`).

A worker owns one process name (its history file and its writer identity in
:func:`~txnchaos.rundir.schema.encode_value`), its clients and its counters.
``start()`` records START and creates the clients, each ``step()`` is one task (a transaction,
a batch, a poll), ``stop()`` records STOP and closes the clients.  The locust users
(:mod:`.users`) call these from a greenlet with a :class:`~.clients.GeventExecutor`; the
crashable subprocess (:mod:`.crashable`) calls them directly.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from confluent_kafka import Consumer, Producer

from ...rundir.client_hangs import write_hang
from ...rundir.run_dir import HISTORY_DIR
from ...rundir.schema import EventType
from ...rundir.writer import HistoryWriter, Op
from .clients import HANG_GRACE_S, HANG_ISSUE, DirectExecutor, Executor, ProducerClient, Reporter
from .recording import CallHung, RecordingProducer

if TYPE_CHECKING:
    from .config import WorkloadConfig

#: How long a task waits for outstanding acks before it moves on (seconds).
FLUSH_TIMEOUT_S = 30.0


def hold_forever() -> NoReturn:
    while True:
        time.sleep(3600)


_resumed = threading.Event()


def resume_on_signal(signum: int) -> None:
    """Let ``signum`` end :func:`hold_until_resumed` (the crashable process installs it for
    SIGUSR1, which a zombie fault sends; call from the main thread)."""
    signal.signal(signum, lambda _sig, _frame: _resumed.set())


def hold_until_resumed() -> None:
    """Stay at a hold point until :func:`resume_on_signal`'s signal arrives (a zombie: the
    process is kept alive, paused, while a new instance takes its transactional id)."""
    while not _resumed.wait(0.2):
        pass


# -- process names ----------------------------------------------------------------------------


class NameAllocator:
    """Hands out process names ``<prefix>-[<tag>-]<n>`` that are unique in the run directory.

    A name whose history file already exists (an earlier incarnation of this runner in the
    same run directory) is skipped, so ``(process, op_id)`` and ``(process, txn)`` are never
    reused.  Returns the name and ``n`` (the user's index within its prefix).
    """

    def __init__(self, run_dir: str | os.PathLike[str], tag: str = "") -> None:
        self.history = Path(run_dir) / HISTORY_DIR
        self.tag = tag
        self._taken: set[str] = set()
        self._next: dict[str, int] = {}
        self._lock = threading.Lock()

    def allocate(self, prefix: str) -> tuple[str, int]:
        with self._lock:
            n = self._next.get(prefix, 0)
            while True:
                name = f"{prefix}-{self.tag}-{n}" if self.tag else f"{prefix}-{n}"
                if name not in self._taken and not (self.history / f"{name}.jsonl").exists():
                    break
                n += 1
            self._taken.add(name)
            self._next[prefix] = n + 1
            return name, n


# -- context ----------------------------------------------------------------------------------


def _never() -> bool:
    return False


def _noop_reporter(_rt: str, _n: str, _ms: float, _e: BaseException | None) -> None:
    return None


@dataclass
class WorkerContext:
    """What every worker of a run shares."""

    config: WorkloadConfig
    run_dir: Path
    bootstrap: str
    executor: Executor = field(default_factory=DirectExecutor)
    reporter: Reporter = _noop_reporter
    seed: int | None = None
    #: Lines buffered by the history writer before a flush (1 = every line).
    flush_every: int = 1
    fsync: bool = False
    #: True once the run asks its users to stop: producers then stop retrying a commit or
    #: an abort (the outcome is recorded unknown), so a cluster that never completes a
    #: transaction cannot hold the stop for minutes of retries.
    stopping: Callable[[], bool] = _never
    #: How long past its own timeout a librdkafka transactional call is waited for before it is
    #: taken for hung (:data:`~.clients.HANG_GRACE_S`; tests shorten it).
    hang_grace_s: float = HANG_GRACE_S
    #: Client constructors (tests substitute fakes).
    producer_factory: Callable[[dict[str, Any]], Any] = Producer
    consumer_factory: Callable[[dict[str, Any]], Any] = Consumer


class Worker(ABC):
    #: The client kind in locust's request events (``txn``, ``copier``, ...).
    request_type: str = ""

    def __init__(self, spec: Any, ctx: WorkerContext, process: str, index: int) -> None:
        self.spec = spec
        self.ctx = ctx
        self.process = process
        self.index = index
        seed = ctx.seed if ctx.seed is not None else random.SystemRandom().getrandbits(32)
        self.rng = random.Random(seed ^ zlib.crc32(process.encode()))
        self.writer = HistoryWriter(
            ctx.run_dir, process, flush_every=ctx.flush_every, fsync=ctx.fsync
        )
        self.started = False
        self.stopped = False

    # -- config helpers ---------------------------------------------------------------------

    def client_conf(self, **base: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.ctx.bootstrap,
            "client.id": self.process,
            **base,
        }
        conf.update(self.ctx.config.client_overrides(self.spec))
        return conf

    def producer_conf(self, transactional_id: str | None = None) -> dict[str, Any]:
        """An idempotent producer's configuration; with ``transactional_id``, a transactional
        one (its timeout from the spec)."""
        txn: dict[str, Any] = {}
        if transactional_id is not None:
            txn = {
                "transactional.id": transactional_id,
                "transaction.timeout.ms": self.spec.transaction_timeout_ms,
            }
        return self.client_conf(
            **{
                **txn,
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 5,
                "statistics.interval.ms": self.ctx.config.statistics_interval_ms,
            }
        )

    def new_producer(self, conf: dict[str, Any], group_id: str | None = None) -> ProducerClient:
        client = ProducerClient(
            conf,
            self.writer,
            executor=self.ctx.executor,
            reporter=self.ctx.reporter,
            request_type=self.request_type,
            padding_bytes=self.spec.padding_bytes,
            producer_factory=self.ctx.producer_factory,
            group_id=group_id,
            stopping=self.ctx.stopping,
            hang_grace_s=self.ctx.hang_grace_s,
        )
        client.on_hang = self.record_hang
        return client

    def record_hang(self, op: Op, hang: CallHung) -> None:
        """A call of this user's client never returned: the run's hang record (a
        ``client_hang`` finding, rundir/client_hangs.py)."""
        import confluent_kafka

        write_hang(
            self.ctx.run_dir,
            {
                "process": self.process,
                "kind": self.spec.kind,
                "user_index": self.index,
                "time_ns": time.time_ns(),
                "call": hang.call,
                "timeout_s": hang.timeout_s,
                "waited_s": round(hang.waited_s, 3),
                "invoke_ns": op.invoke_ns,
                "op_id": op.op_id,
                "type": op.type,
                "txn": op.fields.get("txn"),
                "transactional_id": op.fields.get("transactional_id"),
                "library": "librdkafka",
                "library_version": confluent_kafka.libversion()[0],
                "binding_version": str(confluent_kafka.__version__),
                "issue": HANG_ISSUE if hang.call == "send_offsets_to_transaction" else None,
                "message": str(hang),
            },
        )

    def start(self) -> None:
        self.writer.record(EventType.START, **self.start_fields())
        self.started = True
        self.open_clients()

    def start_fields(self) -> dict[str, Any]:
        return {}

    @abstractmethod
    def open_clients(self) -> None: ...

    @abstractmethod
    def step(self) -> None: ...

    @abstractmethod
    def close_clients(self, abort_open: bool) -> None: ...

    def hold(self, point: str, announce: Callable[[str], None]) -> NoReturn:
        """Run to the crash hold ``point`` (:mod:`.crashable`), ``announce`` it (``HOLD ...``)
        and stay there: the process is killed at that point."""
        raise SystemExit(f"hold point {point!r} does not apply to a {self.spec.kind}")

    def stop(self, *, abort_open: bool = False) -> None:
        """Clean stop: close clients (open transactions stay open unless ``abort_open``)."""
        if self.stopped:
            return
        self.stopped = True
        try:
            self.close_clients(abort_open)
        finally:
            if self.started:
                self.writer.record(EventType.STOP, **self.start_fields())
            self.writer.close()


# -- producers --------------------------------------------------------------------------------


class ProducerWorker(Worker):
    """A user with one producer over the partitions of its ``topics``."""

    client: RecordingProducer | None

    def partitions(self) -> list[tuple[str, int]]:
        cfg = self.ctx.config
        return [(t, p) for t in self.spec.topics for p in range(cfg.partitions(t))]

    @abstractmethod
    def conf(self) -> dict[str, Any]: ...

    def open_clients(self) -> None:
        self.client = self.new_producer(self.conf())

    def close_clients(self, abort_open: bool) -> None:
        if self.client is not None:
            self.client.close(abort_open=abort_open)
            self.client = None


def make_worker(spec: Any, ctx: WorkerContext, names: NameAllocator) -> Worker:
    """The worker of ``spec``'s kind, under the next free process name of its prefix."""
    from .kinds.registry import user_kind

    process, index = names.allocate(ctx.config.process_prefix(spec))
    return user_kind(spec.kind).worker(spec, ctx, process, index)
