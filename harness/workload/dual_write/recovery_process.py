"""The recovery recipe in its own OS process, so that a crash fault can kill it mid-recovery.

``python -m txnchaos.harness.workload.dual_write.recovery_process ARGS`` with the workload
config (JSON) on stdin. It recovers the transactional id of a crashed dual writer and records
the INIT and the COMMIT or ABORT it decides in that writer's history (the writer is dead).
Stdout: ``READY``; with ``--hold in-recovery`` then ``HOLD ...`` after the keep-prepared init
(it stays there until killed); else ``DONE <nothing|committed|aborted>`` and exit 0.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ....rundir.writer import HistoryWriter
from ...clients.two_phase import PreparedTxnState
from ..config import load_workload
from ..workers import hold_forever
from .connect import open_database
from .recovery import recover

IN_RECOVERY = "in-recovery"


def say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def main(argv: list[str] | None = None) -> int:
    from ..kinds.dual_writer import DualWriterSpec, two_phase_client

    ap = argparse.ArgumentParser(prog=f"python -m {__spec__.name if __spec__ else __name__}")
    ap.add_argument("--user", type=int, required=True, help="index of the dual writer's spec")
    ap.add_argument("--writer", required=True, help="the crashed writer's process name")
    ap.add_argument("--txn", type=int, help="its transaction that may be in doubt")
    ap.add_argument("--transactional-id", required=True)
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--run-dir", required=True, type=Path)
    ap.add_argument("--hold", choices=("none", IN_RECOVERY), default="none")
    args = ap.parse_args(argv)

    config = load_workload(json.loads(sys.stdin.read()))
    spec = config.users[args.user]
    if not isinstance(spec, DualWriterSpec):
        raise SystemExit(f"user {args.user} is a {spec.kind}, not a dual_writer")
    db = open_database(spec.database, args.run_dir)
    writer = HistoryWriter.resume(args.run_dir, args.writer)
    client = two_phase_client(
        spec, config, args.bootstrap, args.transactional_id, f"{args.writer}-recovery", writer
    )
    say("READY")

    def hold(ongoing: PreparedTxnState) -> None:
        if args.hold == IN_RECOVERY:
            say(f"HOLD in-recovery ongoing={ongoing}")
            hold_forever()

    try:
        result = recover(client, db, args.transactional_id, args.txn, spec.op_timeout_s, hold)
    finally:
        client.close()
        db.close()
        writer.close()
    say(f"DONE {result.value}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
