"""Client hangs: a blocking call of a workload client's library that never returned (its own
timeout long passed), which the harness stopped waiting for (harness/workload/clients.py's
watchdog; librdkafka#5456 is the known one), recorded where it happened so the verdict can
report it as a finding of its own: a bug in the client library, not in the cluster.

File: ``client-hangs/<process>-<op_id>.json`` in the run directory, one per hung call (a
process may hang more than once; ``op_id`` is unique within it)::

    {
      "process":         str,          # the client's process (history) name
      "kind":            str,          # its user kind (eos_copier, ...)
      "user_index":      int | null,   # the user's index within its spec ({index})
      "time_ns":         int,          # when the harness stopped waiting (wall clock)
      "call":            str,          # the library call (send_offsets_to_transaction, ...)
      "timeout_s":       float,        # the timeout the call was given
      "waited_s":        float,        # how long it had run when the harness gave up
      "invoke_ns":       int,          # when its op was invoked
      "op_id":           int,          # the op completed ``info`` in the history
      "type":            str,          # the op's type (send_offsets, commit, ...)
      "txn":             int | null,   # the op's transaction
      "transactional_id": str | null,
      "library":         str,          # librdkafka
      "library_version": str | null,
      "binding_version": str | null,   # confluent-kafka's version for librdkafka
      "issue":           str | null,   # the library's bug it is taken for (librdkafka#5456)
      "message":         str           # the op's error text
    }
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .client_records import read_records, write_record

HANG_DIR = "client-hangs"


def hang_path(run_dir: str | os.PathLike[str], process: str, op_id: int) -> Path:
    return Path(run_dir) / HANG_DIR / f"{process}-{op_id}.json"


def write_hang(run_dir: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write one hang record whole (temporary file, then rename)."""
    return write_record(hang_path(run_dir, str(record["process"]), int(record["op_id"])), record)


def read_hangs(run_dir: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], str | None]:
    """Every hang record of the run, by time, and a note naming unreadable files (skipped)."""
    return read_records(
        Path(run_dir) / HANG_DIR,
        "hang",
        lambda r: (r.get("time_ns") or 0, r["process"], r.get("op_id") or 0),
    )
