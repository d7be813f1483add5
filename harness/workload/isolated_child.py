"""One workload user in a process of its own, driven step by step by its locust user in the
workload process (:mod:`.isolated`), so that a client library that aborts the process (a
librdkafka ``rd_assert``, a segfault) takes down this user only.

Started as ``python -m txnchaos.harness.workload.isolated_child ARGS``; no locust and no gevent
here: blocking calls run directly.  Protocol, one line each:

* stdin: the workload config (JSON) first, then commands: ``STEP`` (run one worker step),
  ``STOP 0|1`` (stop the worker, aborting an open transaction when 1, and exit);
* stdout: ``READY`` once the worker started, ``EV {"t", "n", "ms", "e"}`` per locust request
  event (request type, name, response time, error text or null), ``ERR <text>`` when a step
  raised (the traceback goes to stderr), ``DONE`` after each step, ``STOPPED`` at the end.

SIGUSR1: the run is stopping its users (commits and aborts are no longer retried).  SIGTERM,
or the parent's death (``PR_SET_PDEATHSIG``), or EOF on stdin: a clean stop.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import signal
import sys
import threading
import traceback
from pathlib import Path
from types import FrameType

from .config import load_workload
from .kinds.registry import user_kind
from .workers import WorkerContext

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """SIGTERM when the workload process dies, whatever killed it (Linux; elsewhere EOF on
    stdin still stops the user between steps)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        pass


class Channel:
    """Lines to the parent (the worker's delivery reports may come from a client's thread)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def say(self, line: str) -> None:
        with self._lock:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()

    def event(self, request_type: str, name: str, ms: float, exc: BaseException | None) -> None:
        e = None if exc is None else str(exc) or type(exc).__name__
        self.say("EV " + json.dumps({"t": request_type, "n": name, "ms": ms, "e": e}))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m txnchaos.harness.workload.isolated_child")
    ap.add_argument("--user", type=int, required=True, help="index into the config's users")
    ap.add_argument("--process", required=True, help="process (history) name")
    ap.add_argument("--index", type=int, default=0, help="user index ({index} in templates)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--run-dir", required=True, type=Path)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--flush-every", type=int, default=1)
    ap.add_argument("--fsync", action="store_true")
    args = ap.parse_args(argv)
    _die_with_parent()

    stopping = threading.Event()
    signal.signal(signal.SIGUSR1, lambda _s, _f: stopping.set())

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    channel = Channel()
    config = load_workload(json.loads(sys.stdin.readline()))
    spec = config.users[args.user]
    ctx = WorkerContext(
        config=config,
        run_dir=args.run_dir,
        bootstrap=args.bootstrap,
        reporter=channel.event,
        seed=args.seed,
        flush_every=args.flush_every,
        fsync=args.fsync,
        stopping=stopping.is_set,
    )
    worker = user_kind(spec.kind).worker(spec, ctx, args.process, args.index)
    abort_open = False
    try:
        worker.start()
        channel.say("READY")
        for raw in sys.stdin:
            command = raw.split()
            if not command:
                continue
            if command[0] == "STOP":
                abort_open = command[1:] == ["1"]
                break
            if command[0] != "STEP":
                raise SystemExit(f"unknown command {raw.strip()!r}")
            try:
                worker.step()
            except Exception as exc:  # a bug in a worker: as locust would, log it, go on
                traceback.print_exc()
                channel.say(f"ERR {type(exc).__name__}: {exc}".replace("\n", " "))
            channel.say("DONE")
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        worker.stop(abort_open=abort_open)
    channel.say("STOPPED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
