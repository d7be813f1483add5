"""Locust users: one base class per registered user kind, one subclass per user spec of a scenario.

Each user instance wraps a :class:`~.workers.Worker` with its own process name (history file,
writer identity in the values).  Blocking librdkafka calls run in gevent's thread pool
(:class:`~.clients.GeventExecutor`); locust request events are fired here, from the user's
greenlet, with ``request_type`` the client kind (``txn``, ``idempotent``, ``consumer``,
``copier``) and ``name`` the operation (``init``, ``begin``, ``send``, ``send_offsets``,
``commit``, ``abort``, ``poll``, ``assign``, ``revoke``).

The users find their shared run context on the locust environment
(``environment.txnchaos`` = :class:`WorkloadRuntime`), which :mod:`.runner` sets.

Importing this module imports locust, which monkey-patches the process with gevent: import it
(or :mod:`.runner`) before anything that starts threads.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from dataclasses import dataclass
from typing import Any, ClassVar

import gevent
import locust  # noqa: F401  (first: gevent monkey-patching)
from gevent import GreenletExit
from locust import User, constant, constant_throughput, task

from .isolated import IsolatedWorker, isolated
from .kinds.kind import UserKind
from .kinds.registry import KINDS
from .load_shape import LoadShape
from .workers import NameAllocator, Worker, WorkerContext, make_worker

log = logging.getLogger(__name__)


@dataclass
class WorkloadRuntime:
    """What the users of one locust environment share."""

    ctx: WorkerContext
    names: NameAllocator
    #: A clean stop aborts open transactions only when this is set.
    abort_open_on_stop: bool = False
    #: How long a stopping user lets its current step (transaction) finish.
    task_grace_s: float = 60.0
    #: the isolated users' processes that run (isolated.py), told when the run stops
    children: set[IsolatedWorker] = dataclasses.field(default_factory=set)
    #: users whose worker has started (the runner starts the clock once all have)
    users_running: int = 0


class WorkloadUser(User):
    """Base class: runs one worker's ``step()`` per task."""

    abstract = True
    spec: ClassVar[Any] = None
    worker: Worker | IsolatedWorker | None = None

    def _runtime(self) -> WorkloadRuntime:
        rt = getattr(self.environment, "txnchaos", None)
        if rt is None:
            raise RuntimeError("environment.txnchaos is not set (start users through runner.py)")
        return rt

    def _report(self, request_type: str, name: str, ms: float, exc: BaseException | None) -> None:
        self.environment.events.request.fire(
            request_type=request_type,
            name=name,
            response_time=ms,
            response_length=0,
            exception=exc,
            context={"process": self.worker.process if self.worker else None},
        )

    def on_start(self) -> None:
        rt = self._runtime()
        runner = self.environment.runner
        index = getattr(runner, "worker_index", -1)
        if type(runner).__name__ == "WorkerRunner" and index >= 0 and not rt.names.tag:
            rt.names.tag = f"w{index}"
        ctx = dataclasses.replace(rt.ctx, reporter=self._report)
        if isolated(self.spec, ctx.config):
            self.worker = IsolatedWorker(self.spec, ctx, rt.names, children=rt.children)
        else:
            self.worker = make_worker(self.spec, ctx, rt.names)
        try:
            self.worker.start()
        finally:
            rt.users_running += 1  # started, or failed to (locust logs why): not waited for

    @task
    def step(self) -> None:
        """One worker step, shielded from locust's kill.

        locust stops a user that it sees waiting by killing its greenlet, and the kill can land
        after the wait ended and the next task began (for ``wait_time`` 0 nearly always); a
        transaction would then be cut between its sends and its commit by a *clean* stop.  So
        the step runs in its own greenlet, and a kill of the user's greenlet waits (up to
        ``task_grace_s``) for the step to finish before it takes effect.
        """
        assert self.worker is not None
        inner = gevent.spawn(self.worker.step)
        try:
            inner.get()
        except GreenletExit:
            inner.join(timeout=self._runtime().task_grace_s)
            inner.kill(block=False)
            raise

    def on_stop(self) -> None:
        if self.worker is not None:
            try:
                self.worker.stop(abort_open=self._runtime().abort_open_on_stop)
            except Exception:
                log.exception("stopping %s", self.worker.process)


def _user_base(kind: UserKind) -> type[WorkloadUser]:
    """The abstract locust user of one kind, named as its entry says."""
    doc = f"A {kind.name} user (see {kind.worker.__module__})."
    return type(
        kind.locust_user,
        (WorkloadUser,),
        {"abstract": True, "__doc__": doc, "__module__": __name__},
    )


#: The locust user base of each registered kind (built here: the registry imports no locust).
USER_BASES: dict[str, type[WorkloadUser]] = {k.name: _user_base(k) for k in KINDS}


def user_classes(config: Any, shape: LoadShape | None = None) -> list[type[WorkloadUser]]:
    """One concrete user class per spec with ``count > 0``.

    Class names are derived from the config only (``<Base>_<prefix>``), so a master and its
    workers started with the same config agree on them (locust's distributed mode sends class
    names).  Users run their fixed ``count``; under a load ``shape`` the scaled kinds' users
    are weighted by their count instead, and the shape says how many run.
    """
    out: list[type[WorkloadUser]] = []
    for spec in config.users:
        if spec.count == 0:
            continue
        scaled = shape is not None and spec.kind in shape.scaled
        base = USER_BASES[spec.kind]
        prefix = config.process_prefix(spec)
        name = f"{base.__name__}_{re.sub(r'[^A-Za-z0-9_]', '_', prefix)}"
        wait = constant_throughput(spec.rate) if spec.rate else constant(spec.pause_ms / 1000.0)
        cls = type(
            name,
            (base,),
            {
                "abstract": False,
                "spec": spec,
                "fixed_count": 0 if scaled else spec.count,
                "weight": spec.count,
                "wait_time": wait,
                "__module__": __name__,
            },
        )
        out.append(cls)
    return out
