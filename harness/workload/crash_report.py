"""What a client process that died unasked leaves for the verdict: its crash record
(``client-crashes/<process>.json``, :mod:`..history.client_crashes`) and a STOP op with outcome
info closing its history, built from its return code, its log and its history.

Locust-free: the isolated users' supervisor (:mod:`.isolated`) and the orchestrator (a shared
workload process that died with all its users) both call :func:`record_client_crash`.
"""

from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path
from typing import Any

from ...rundir.client_crashes import write_crash
from ...rundir.run_dir import HISTORY_DIR
from ...rundir.schema import EventType, Outcome
from ...rundir.writer import HistoryWriter

#: lines that say why a process aborted, most telling first
_WHY = (
    re.compile(r"Assertion .* failed"),  # glibc assert(), librdkafka's rd_assert
    re.compile(r"Fatal Python error"),
    re.compile(r"\*\*\* .* \*\*\*"),  # glibc: *** stack smashing detected ***, double free
    re.compile(r"terminate called"),  # C++
    re.compile(r"Segmentation fault|Aborted|core dumped"),
)
#: the program prefix of an assertion line (``python: rdkafka_txnmgr.c:1007: ...``)
_PROGRAM = re.compile(r"^[\w.+-]+: (?=\S+\.\w+:\d+:)")
#: how many in-flight ops a record keeps (the latest), and log lines
IN_FLIGHT_KEPT = 10
LOG_LINES_KEPT = 20


def signal_name(returncode: int) -> str | None:
    """``SIGABRT`` for -6; None for an exit code."""
    if returncode >= 0:
        return None
    try:
        return signal.Signals(-returncode).name
    except ValueError:
        return f"signal {-returncode}"


def tail_lines(path: Path | None, n: int = 200) -> list[str]:
    if path is None:
        return []
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - 65536))
            lines = fh.read().decode("utf-8", errors="replace").splitlines()
    except OSError:
        return []
    return lines[-n:]


def crash_message(lines: list[str], returncode: int) -> str:
    """The line that says why (an assertion, a fatal error), else the signal or exit code."""
    for pattern in _WHY:
        for line in reversed(lines):
            if pattern.search(line):
                return _PROGRAM.sub("", line.strip())
    name = signal_name(returncode)
    return f"killed by {name}" if name else f"exited with code {returncode}"


def client_library(message: str, native_client: bool) -> tuple[str, str | None, str | None]:
    """(library, its version, the binding's version) of the client that crashed."""
    if "rdkafka" in message or native_client:
        try:
            import confluent_kafka

            return "librdkafka", confluent_kafka.libversion()[0], str(confluent_kafka.__version__)
        except ImportError:  # pragma: no cover - a dependency of the project
            return "librdkafka", None, None
    import platform

    return "python", platform.python_version(), None


def in_flight(run_dir: Path, processes: list[str]) -> list[dict[str, Any]]:
    """The ops ``processes`` invoked and never completed, by invoke time (the latest kept)."""
    ops = [op for process in processes for op in _in_flight_of(run_dir, process)]
    ops.sort(key=lambda o: (o["invoke_ns"] or 0, o["process"], o["op_id"]))
    return ops[-IN_FLIGHT_KEPT:]


def _in_flight_of(run_dir: Path, process: str) -> list[dict[str, Any]]:
    path = run_dir / HISTORY_DIR / f"{process}.jsonl"
    invoked: dict[int, dict[str, Any]] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    for raw in text.splitlines():
        try:
            line = json.loads(raw)
            op_id = int(line["op_id"])
        except (ValueError, KeyError, TypeError):
            continue
        if "outcome" in line:
            invoked.pop(op_id, None)
        else:
            invoked[op_id] = {
                "process": process,
                "type": line.get("type"),
                "op_id": op_id,
                "txn": line.get("txn"),
                "invoke_ns": line.get("invoke_ns"),
            }
    return list(invoked.values())


def record_client_crash(
    run_dir: str | os.PathLike[str],
    process: str,
    *,
    kind: str,
    returncode: int,
    log: Path | None,
    native_client: bool = True,
    user_index: int | None = None,
    time_ns: int | None = None,
    restarted_as: str | None = None,
    users: list[str] | None = None,
) -> dict[str, Any]:
    """Write ``process``'s crash record and end its history with a STOP op, outcome info,
    naming the crash; returns the record.  ``users``: the processes whose clients the crashed
    process hosted, when not itself alone (the shared workload process: every user's history
    gets the STOP)."""
    root = Path(run_dir)
    now = time_ns or time.time_ns()
    lines = tail_lines(log)
    message = crash_message(lines, returncode)
    library, version, binding = client_library(message, native_client)
    try:
        shown_log = log.relative_to(root).as_posix() if log is not None else None
    except ValueError:
        shown_log = str(log)
    record = {
        "process": process,
        "kind": kind,
        "user_index": user_index,
        "time_ns": now,
        "signal": signal_name(returncode),
        "exit_code": returncode,
        "library": library,
        "library_version": version,
        "binding_version": binding,
        "message": message,
        "log_tail": lines[-LOG_LINES_KEPT:],
        "log": shown_log,
        "in_flight": in_flight(root, users if users is not None else [process]),
        "restarted_as": restarted_as,
    }
    write_crash(root, record)
    for user in users if users is not None else [process]:
        if (root / HISTORY_DIR / f"{user}.jsonl").exists():
            with HistoryWriter.resume(root, user) as w:
                w.record(
                    EventType.STOP,
                    Outcome.INFO,
                    invoke_ns=now,
                    complete_ns=now,
                    error=f"client crash ({record['signal'] or returncode}): {message}",
                )
    return record
