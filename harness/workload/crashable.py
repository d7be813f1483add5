"""A workload user as its own OS process, so that it can be SIGKILLed (client crash faults).

Started by :mod:`.crash` as ``python -m txnchaos.harness.workload.crashable ARGS`` with the
workload config (JSON) on stdin.  No locust and no gevent here: blocking calls run directly.

Protocol on stdout (one line each, flushed): ``READY`` once the worker has started, then
``HOLD <detail>`` when it reaches its hold point and stops there until it is killed:

* ``before-commit`` (transactional producer, copier): the ``hold_after``-th transaction has
  begun, its records are sent and acknowledged (flushed, so they are in the log) and, for a
  copier, its offsets sent; commit is never called.  The open transaction must later be
  aborted by the coordinator (transaction.timeout.ms) or fenced by a successor.
* ``before-ack`` (idempotent producer): a batch is produced and the process never serves its
  delivery reports: the history holds sends without completions.
* ``in-poll`` (consumer, copier): after ``hold_after`` steps, ``HOLD`` is printed just before a
  long consume() call, so a kill lands in the middle of the poll.
* ``zombie`` (transactional producer): as ``before-commit``, then it waits (its process may be
  stopped with SIGSTOP meanwhile) until SIGUSR1, commits that transaction, prints
  ``RESUMED <detail>`` and stays: a fenced instance come back, whose commit a correct
  cluster refuses once a new instance has initialised.
* ``after-prepare`` / ``after-db-commit`` (dual writer): a KIP-939 transaction prepared and
  its database rows written but not committed / committed, the Kafka commit never called.

Each worker's ``hold`` implements the points its kind takes (its registry entry's
``crash_holds``).

SIGTERM is a clean stop (clients closed without aborting an open transaction).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path
from types import FrameType

from .config import load_workload
from .kinds.registry import KINDS, user_kind
from .workers import WorkerContext, resume_on_signal

#: ``none`` and every hold point some registered kind takes (its ``crash_holds``).
HOLDS = ("none", *sorted({hold for kind in KINDS for hold in kind.crash_holds.values()}))


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m txnchaos.harness.workload.crashable")
    ap.add_argument("--user", type=int, required=True, help="index into the config's users")
    ap.add_argument("--process", required=True, help="process (history) name")
    ap.add_argument("--index", type=int, default=0, help="user index ({index} in templates)")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--run-dir", required=True, type=Path)
    ap.add_argument("--seed", type=int)
    ap.add_argument("--hold", choices=HOLDS, default="none")
    ap.add_argument("--hold-after", type=int, default=0, help="complete steps before holding")
    ap.add_argument("--flush-every", type=int, default=1)
    args = ap.parse_args(argv)

    config = load_workload(json.loads(sys.stdin.read()))
    spec = config.users[args.user]
    ctx = WorkerContext(
        config=config,
        run_dir=args.run_dir,
        bootstrap=args.bootstrap,
        seed=args.seed,
        flush_every=args.flush_every,
    )
    worker = user_kind(spec.kind).worker(spec, ctx, args.process, args.index)
    stopping = False

    def on_term(_sig: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    resume_on_signal(signal.SIGUSR1)
    try:
        worker.start()
        say("READY")
        steps = 0
        while True:
            if args.hold != "none" and steps >= args.hold_after:
                worker.hold(args.hold, say)
            worker.step()
            steps += 1
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        worker.stop(abort_open=False)
    say("STOPPED")
    return 0


if __name__ == "__main__":
    sys.exit(main())
