"""Unhandled errors inside the nodes of the cluster under test (ours and Apache Kafka's), read from
their logs.

A txnchaos node answers every request it cannot serve with an error code; an exception that
escapes a request handler or a background task (an ``IndexError`` in recovery, a
``KeyError`` in the marker sender, an assertion) is a bug in the node even when no client
ever sees its effect: the request gets no answer, a task stops, a partition stays closed.
The checkers judge what clients saw; this module finds what the nodes themselves reported.

Read from ``cluster/node-<id>/node.log`` (the local launcher writes it as the node runs, the
docker launcher saves the container's log there when the cluster stops).  A node logs a
traceback after an ``ERROR`` line (``log.exception``), or bare on its standard error (an
exception in a thread, such as the metrics endpoint's).  Each traceback ends with the
exception's type; that type decides whether it counts:

* errors of the environment do not: the whole ``OSError`` family (connections reset or
  refused, a full or failing disk, a timeout), a cancelled task at shutdown, a peer that
  cannot be reached.  Faults cause those on purpose.  Nor do the tracebacks Python prints
  under ``Exception ignored in:`` as a stopping node's unfinished coroutines are collected
  after its loop closed.
* every other type does (``AssertionError``, ``KeyError``, ``RuntimeError``,
  ``CorruptBatch``, ...): nothing the harness does to a node should make its code raise them.

ERROR lines without a traceback are left alone: some are the node's own account of a refused
state (``cannot fence epoch MAX``) rather than a fault in its code.

Apache Kafka's nodes (``node.log``, the JVM's SLF4J simple logger) log many exceptions at ERROR
under ordinary faults (``NotLeaderOrFollowerException``, ``OutOfOrderSequenceException``, an
``IOException`` from a cut link): those are Kafka telling a client no, not a fault in its code.
What counts there is the Java programming errors (:data:`JAVA_PROGRAMMING_ERRORS`:
``IllegalStateException``, ``NullPointerException``, ``IllegalArgumentException``, an index out
of bounds, ...) thrown from Kafka's own code (a stack frame in ``org.apache.kafka`` or
``kafka.``), wherever in an exception's chain: Kafka raises them when its own invariants break
(KAFKA-19367 logged ``IllegalArgumentException: Illegal new producer epoch`` at every timeout
round).
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: where each node's log is, relative to the run directory
NODE_LOGS = "cluster/node-*/node.log"
#: the exception types (the last part of the name) that faults cause on purpose
ENVIRONMENT = frozenset(
    {
        "OSError",
        "IOError",
        "EnvironmentError",
        "ConnectionError",
        "ConnectionResetError",
        "ConnectionAbortedError",
        "ConnectionRefusedError",
        "BrokenPipeError",
        "TimeoutError",
        "FileNotFoundError",
        "FileExistsError",
        "PermissionError",
        "IsADirectoryError",
        "NotADirectoryError",
        "InterruptedError",
        "BlockingIOError",
        "gaierror",
        "SSLError",
        "CancelledError",
        "IncompleteReadError",
        "PeerUnavailable",
        "KeyboardInterrupt",
        "SystemExit",
    }
)
#: the Java exception types that mean a broken invariant in Kafka's code, not a refusal
JAVA_PROGRAMMING_ERRORS = frozenset(
    {
        "java.lang.IllegalStateException",
        "java.lang.IllegalArgumentException",
        "java.lang.NullPointerException",
        "java.lang.ClassCastException",
        "java.lang.IndexOutOfBoundsException",
        "java.lang.ArrayIndexOutOfBoundsException",
        "java.lang.StringIndexOutOfBoundsException",
        "java.lang.NegativeArraySizeException",
        "java.lang.ArithmeticException",
        "java.lang.AssertionError",
        "java.lang.StackOverflowError",
        "java.util.ConcurrentModificationException",
        "java.util.NoSuchElementException",
    }
)
#: the flavours whose logs are read, and how
FLAVOURS = ("txnchaos", "apache-kafka")
#: how many distinct errors a run reports in full (the rest are counted)
MAX_DISTINCT = 10

_HEADER = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(?P<ms>\d{3}) (?P<node>node-\d+) "
    r"(?P<level>[A-Z]+) (?P<logger>[^:]+): (?P<message>.*)$"
)
_TRACEBACK = "Traceback (most recent call last):"
_CHAINING = (
    "During handling of the above exception",
    "The above exception was the direct cause",
)
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<detail>.*))?$")
_FRAME = re.compile(r'^\s+File "(?P<path>[^"]+)", line (?P<line>\d+), in (?P<func>.+)$')


@dataclass
class NodeError:
    """One kind of unhandled error (same type, same place in the code) and how often."""

    node: str  # the first node that logged it: node-1001
    exception: str  # its type as logged: txnchaos.cluster.protocol.record_batch.CorruptBatch
    detail: str  # the exception's message
    where: str  # the innermost frame in the cluster's code: storage/log.py:153 in _load
    message: str | None  # the ERROR line before the traceback, if one was
    time_s: float | None  # when it was first logged (epoch seconds, from the log's clock)
    count: int = 1
    nodes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "nodes": self.nodes,
            "exception": self.exception,
            "detail": self.detail,
            "where": self.where,
            "message": self.message,
            "time_s": self.time_s,
            "count": self.count,
        }


def is_environment(exception: str) -> bool:
    """Whether an exception type (as a traceback names it) is one faults cause on purpose."""
    return exception.rsplit(".", 1)[-1] in ENVIRONMENT


def _epoch(ts: str, ms: str) -> float | None:
    try:
        return time.mktime(time.strptime(ts, "%Y-%m-%d %H:%M:%S")) + int(ms) / 1000
    except ValueError:
        return None


def _where(frames: list[tuple[str, str, str]]) -> str:
    """The innermost frame in the cluster's code (else the innermost frame at all)."""
    for path, line, func in reversed(frames):
        marker = "/cluster/"
        if marker in path:
            return f"{path.rsplit(marker, 1)[1]}:{line} in {func}"
    if frames:
        path, line, func = frames[-1]
        return f"{os.path.basename(path)}:{line} in {func}"
    return "?"


def _node_error(
    node: str,
    exception: re.Match[str],
    where: str,
    header: re.Match[str] | None,
    owned: bool,
    message_limit: int | None = None,
) -> NodeError:
    """One error as read from a log: ``exception`` names its ``type`` and ``detail``; the
    last log line before it (``header``) dates it, and gives its message when it is the
    line the error was logged under (``owned``)."""
    message = header["message"][:message_limit] if owned and header else None
    return NodeError(
        node=node,
        exception=exception["type"],
        detail=(exception["detail"] or "").strip(),
        where=where,
        message=message,
        time_s=_epoch(header["ts"].replace("T", " "), header["ms"]) if header else None,
        nodes=[node],
    )


def _owned_by(
    header: re.Match[str] | None, header_at: int, at: int, levels: tuple[str, ...]
) -> bool:
    """Whether the log line ``header`` (at line ``header_at``) is the one the error starting
    at line ``at`` was logged under: at one of ``levels``, right before it (a multi-line
    message aside)."""
    return header is not None and header["level"] in levels and header_at >= at - 3


def scan_log(text: str, node: str) -> list[NodeError]:
    """Every traceback in one node's log that is not an error of the environment, in order
    (not yet merged)."""
    lines = text.splitlines()
    found: list[NodeError] = []
    header: re.Match[str] | None = None
    header_at = -2
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _HEADER.match(line)
        if m:
            header, header_at = m, i
            i += 1
            continue
        if line != _TRACEBACK:
            i += 1
            continue
        frames: list[tuple[str, str, str]] = []
        last: re.Match[str] | None = None
        chained = False  # a chaining sentence was read: the next Traceback continues this one
        j = i + 1
        while j < len(lines) and not _HEADER.match(lines[j]):
            text_j = lines[j]
            if text_j.startswith("Exception ignored in") or (text_j == _TRACEBACK and not chained):
                break  # another traceback of its own begins
            f = _FRAME.match(text_j)
            if f:
                frames.append((f["path"], f["line"], f["func"]))
            elif text_j == _TRACEBACK:
                chained = False
            elif text_j and not text_j[0].isspace():
                if text_j.startswith(_CHAINING):
                    frames, chained = [], True
                else:
                    e = _EXCEPTION.match(text_j)
                    if e:
                        last = e
            j += 1
        # "Exception ignored in: <coroutine ...>": a task collected after the node's loop
        # closed (the process is exiting), not a failure of the code it ran
        at_exit = i > 0 and lines[i - 1].startswith("Exception ignored in")
        if last is not None and not at_exit and not is_environment(last["type"]):
            owned = _owned_by(header, header_at, i, ("ERROR", "CRITICAL"))
            found.append(_node_error(node, last, _where(frames), header, owned))
        i = j
    return found


_JAVA_HEADER = re.compile(
    r"^(?P<ts>\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)\.(?P<ms>\d{3}) \[[^\]]*\] "
    r"(?P<level>[A-Z]+) (?P<logger>\S+) - (?P<message>.*)$"
)
_JAVA_EXCEPTION = re.compile(
    r"^(?:Caused by: )?(?P<type>[a-z][\w$]*(?:\.[\w$]+)+)(?::\s?(?P<detail>.*))?$"
)
_JAVA_FRAME = re.compile(r"^\s+at (?P<frame>(?:[\w$]+/)?[\w$.<>]+\([^)]*\))$")
_KAFKA_CODE = ("org.apache.kafka.", "kafka.")


def _kafka_frame(frame: str) -> bool:
    return frame.split("/", 1)[-1].startswith(_KAFKA_CODE)


def scan_java_log(text: str, node: str) -> list[NodeError]:
    """Every Java programming error thrown from Kafka's code in one Apache Kafka node's log
    (each exception of a chain on its own), in order (not yet merged)."""
    lines = text.splitlines()
    found: list[NodeError] = []
    header: re.Match[str] | None = None
    header_at = -2
    i = 0
    while i < len(lines):
        line = lines[i]
        h = _JAVA_HEADER.match(line)
        if h:
            header, header_at = h, i
            i += 1
            continue
        e = _JAVA_EXCEPTION.match(line)
        if e is None or e["type"] not in JAVA_PROGRAMMING_ERRORS:
            i += 1
            continue
        frames = []
        j = i + 1
        while j < len(lines) and (f := _JAVA_FRAME.match(lines[j])):
            frames.append(f["frame"])
            j += 1
        ours = [fr.split("/", 1)[-1] for fr in frames if _kafka_frame(fr)]
        if ours:
            owned = _owned_by(header, header_at, i, ("ERROR", "WARN"))
            found.append(_node_error(node, e, ours[0], header, owned, message_limit=300))
        i = j
    return found


def merge(errors: list[NodeError]) -> list[NodeError]:
    """One entry per (type, place), first seen first, counting repeats and the nodes."""
    merged: dict[tuple[str, str], NodeError] = {}
    for e in errors:
        key = (e.exception, e.where)
        seen = merged.get(key)
        if seen is None:
            merged[key] = e
            continue
        seen.count += e.count
        seen.nodes += [n for n in e.nodes if n not in seen.nodes]
        if e.time_s is not None and (seen.time_s is None or e.time_s < seen.time_s):
            seen.time_s = e.time_s
    return sorted(merged.values(), key=lambda e: (e.time_s is None, e.time_s or 0.0))


def read_node_errors(
    run_dir: str | os.PathLike[str], flavour: str | None = "txnchaos"
) -> tuple[list[NodeError], str | None]:
    """The run's node errors, merged, and a note naming the logs that could not be read.
    ``flavour``: the cluster's (``txnchaos``: Python tracebacks; ``apache-kafka``: Java
    programming errors; any other, or None when unknown: nothing is read)."""
    if flavour not in FLAVOURS:
        return [], None
    scan = scan_log if flavour == "txnchaos" else scan_java_log
    unreadable = []
    errors: list[NodeError] = []
    for path in sorted(Path(run_dir).glob(NODE_LOGS)):
        try:
            text = path.read_text(errors="replace")
        except OSError as exc:
            unreadable.append(f"{path.parent.name}: {exc.strerror or exc}")
            continue
        errors += scan(text, path.parent.name)
    note = f"node logs not read: {', '.join(unreadable)}" if unreadable else None
    return merge(errors), note
