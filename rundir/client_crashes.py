"""Client crashes: a workload client process that died from a signal or a library assertion
(librdkafka's ``abort()`` on a failed ``rd_assert``, a segfault), recorded where it happened so
the verdict can report it as a finding of its own rather than a harness failure.

File: ``client-crashes/<process>.json`` in the run directory, one per crashed process (process
names are unique in a run, so the directories of distributed workers merge without clashes)::

    {
      "process":         str,        # the crashed client's process (history) name
      "kind":            str,        # its user kind (transactional_producer, ...), or "workload"
                                     # when the shared workload process died with all its users
      "user_index":      int | null, # the user's index within its spec ({index})
      "time_ns":         int,        # when the crash was seen (wall clock)
      "signal":          str | null, # SIGABRT, SIGSEGV, ... (null: it exited with a code)
      "exit_code":       int,        # the process's return code (negative: the signal)
      "library":         str,        # the client library that crashed (librdkafka, ...)
      "library_version": str | null,
      "binding_version": str | null, # confluent-kafka's version for librdkafka
      "message":         str,        # the assertion / fatal error line, else the signal's name
      "log_tail":        [str],      # the last lines the process wrote to stderr
      "log":             str | null, # its log file, relative to the run directory
      "in_flight":       [{"process", "type", "op_id", "txn", "invoke_ns"}],  # the latest ops
                                     # invoked and never completed
      "restarted_as":    str | null  # the process that took over the user, if one did
    }
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .client_records import read_records, write_record

CRASH_DIR = "client-crashes"


def crash_path(run_dir: str | os.PathLike[str], process: str) -> Path:
    return Path(run_dir) / CRASH_DIR / f"{process}.json"


def write_crash(run_dir: str | os.PathLike[str], record: dict[str, Any]) -> Path:
    """Write one crash record whole (temporary file, then rename)."""
    return write_record(crash_path(run_dir, str(record["process"])), record)


def read_crashes(run_dir: str | os.PathLike[str]) -> tuple[list[dict[str, Any]], str | None]:
    """Every crash record of the run, by time, and a note naming unreadable files (skipped)."""
    return read_records(
        Path(run_dir) / CRASH_DIR, "crash", lambda r: (r.get("time_ns") or 0, r["process"])
    )
