"""Child processes that die with the harness that started them.

A harness killed with ``kill -9`` runs no cleanup, and processes started in a session of
their own (``start_new_session``, so that a Ctrl-C of the terminal does not reach them)
outlive it: a dead ``txnchaos run`` left its nodes serving (issue 35, item 10). Linux's
``PR_SET_PDEATHSIG`` makes the kernel send the child a signal when its parent dies, and
that needs no cooperation from the child.

One subtlety decides the design: the signal is sent when the *thread* that forked the
child exits, not the process (prctl(2)). A node restarted by a nemesis thread that then
ends would be killed with it. Every child is therefore forked by one long-lived thread of
this module (:func:`spawn`), which lives as long as the harness process.

Use it for processes the harness owns for its lifetime (``txnchaos run``'s nodes, the
Kafka launcher's JVMs); not for ``txnchaos cluster up``, whose nodes are meant to outlive
the command. Every child also names its harness in its environment (``owner.OWNER_ENV``):
what a dead run left anyway (a child of a harness killed before its spawner existed,
containers, temp dirs) ``txnchaos cleanup`` finds by that and by labels.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from .owner import owned_environment

PR_SET_PDEATHSIG = 1

_spawner: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def die_with_parent(sig: int = signal.SIGKILL) -> Callable[[], None]:
    """A ``preexec_fn`` that asks the kernel for ``sig`` when the forking thread ends, and
    sends it at once if the parent is already gone (it died between fork and prctl)."""
    parent = os.getpid()

    def preexec() -> None:
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
        if os.getppid() != parent:
            os.kill(os.getpid(), sig)

    return preexec


def _executor() -> ThreadPoolExecutor:
    global _spawner
    with _lock:
        if _spawner is None:
            # One worker that never exits before the process: children forked by it keep
            # their death signal tied to the harness process's life, not a caller's thread.
            _spawner = ThreadPoolExecutor(max_workers=1, thread_name_prefix="txnchaos-spawner")
        return _spawner


def spawn(argv: list[str], **popen_args: Any) -> subprocess.Popen[Any]:
    """``subprocess.Popen(argv, **popen_args)`` for a child that gets SIGKILL when the
    harness process dies (forked by the long-lived spawner thread), with this harness
    named in its environment."""
    preexec = die_with_parent()
    popen_args["env"] = owned_environment(popen_args.get("env"))

    def start() -> subprocess.Popen[Any]:
        return subprocess.Popen(argv, preexec_fn=preexec, **popen_args)

    return _executor().submit(start).result()
