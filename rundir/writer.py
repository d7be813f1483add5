"""Append-only JSON Lines history writer, one file per process (``history/<process>.jsonl``).

A process records an operation either in two steps (:meth:`HistoryWriter.invoke` then
:meth:`HistoryWriter.complete`), which writes an invocation line first so that a crash in the
middle leaves an operation of unknown outcome behind, or in one step (:meth:`HistoryWriter.record`)
for operations whose invocation need not survive a crash (polls, assignments).

Lines are flushed to the OS after every ``flush_every`` lines and always after the invocation of
a commit, abort or send_offsets (the operations whose in-doubt state matters most), so a crash
loses at most the last unflushed lines.  ``fsync=True`` also survives a machine crash.
The writer is thread-safe (one lock), since workloads run blocking client calls in thread pools.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .jsonl import TORN_LINE_MARKER
from .schema import ITEM_FIELDS, OP_FIELDS, EventType, Outcome

_ITEM_KEYS = tuple(f.name for f in ITEM_FIELDS)
_OP_KEYS = frozenset(f.name for f in OP_FIELDS)
_ALWAYS_FLUSH = frozenset({EventType.COMMIT, EventType.ABORT, EventType.SEND_OFFSETS})

Item = Mapping[str, Any]


@dataclass
class Op:
    """An invoked operation awaiting completion."""

    op_id: int
    type: str
    invoke_ns: int
    fields: dict[str, Any] = field(default_factory=dict)
    items: list[dict[str, Any]] = field(default_factory=list)


def _clean_items(items: Iterable[Item] | None) -> list[dict[str, Any]]:
    if not items:
        return []
    out = []
    for it in items:
        unknown = set(it) - set(_ITEM_KEYS)
        if unknown:
            raise ValueError(f"unknown item fields: {sorted(unknown)}")
        out.append({k: it[k] for k in _ITEM_KEYS if it.get(k) is not None})
    return out


def _check_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    unknown = set(fields) - _OP_KEYS
    if unknown:
        raise ValueError(f"unknown op fields: {sorted(unknown)}")
    return {k: v for k, v in fields.items() if v is not None}


class HistoryWriter:
    """Writes one process's history as JSON Lines under ``run_dir/history/``."""

    def __init__(
        self,
        run_dir: str | os.PathLike[str],
        process: str,
        *,
        flush_every: int = 1,
        fsync: bool = False,
        clock: Any = time.time_ns,
    ) -> None:
        if "|" in process or "/" in process:
            raise ValueError(f"process name must not contain '|' or '/': {process!r}")
        self.process = process
        self.path = Path(run_dir) / "history" / f"{process}.jsonl"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh = self.path.open("a", encoding="utf-8")
        self._lock = threading.Lock()
        self._next_op = 0
        self._pending = 0
        self._flush_every = max(1, flush_every)
        self._fsync = fsync
        self._clock = clock

    # -- public API -----------------------------------------------------------------------

    def invoke(
        self,
        type: EventType | str,
        *,
        items: Iterable[Item] | None = None,
        log: bool = True,
        **fields: Any,
    ) -> Op:
        """Start an operation; writes its invocation line unless ``log`` is false."""
        etype = EventType(type)
        with self._lock:
            op = Op(self._next_op, etype.value, self._clock(), _check_fields(fields))
            self._next_op += 1
            op.items = _clean_items(items)
            if log:
                self._write(self._line(op, None, None, None, op.items), etype in _ALWAYS_FLUSH)
        return op

    def complete(
        self,
        op: Op,
        outcome: Outcome | str,
        *,
        items: Iterable[Item] | None = None,
        error: str | None = None,
        **fields: Any,
    ) -> None:
        """Finish ``op``: items given here replace the invocation's items (e.g. acked offsets)."""
        done = self._clock()
        merged = {**op.fields, **_check_fields(fields)}
        its = _clean_items(items) if items is not None else op.items
        with self._lock:
            op.fields = merged
            self._write(self._line(op, Outcome(outcome).value, done, error, its), False)

    def record(
        self,
        type: EventType | str,
        outcome: Outcome | str = Outcome.OK,
        *,
        invoke_ns: int | None = None,
        complete_ns: int | None = None,
        items: Iterable[Item] | None = None,
        error: str | None = None,
        **fields: Any,
    ) -> int:
        """Record a completed operation in one line; returns its op_id."""
        etype = EventType(type)
        now = self._clock()
        with self._lock:
            op = Op(self._next_op, etype.value, invoke_ns if invoke_ns is not None else now)
            self._next_op += 1
            op.fields = _check_fields(fields)
            line = self._line(
                op,
                Outcome(outcome).value,
                complete_ns if complete_ns is not None else now,
                error,
                _clean_items(items),
            )
            self._write(line, False)
            return op.op_id

    def flush(self) -> None:
        with self._lock:
            self._flush()

    def close(self) -> None:
        with self._lock:
            if not self._fh.closed:
                self._flush()
                self._fh.close()

    @classmethod
    def resume(cls, run_dir: str | os.PathLike[str], process: str, **kwargs: Any) -> HistoryWriter:
        """Append to an existing process history (e.g. a crashed process's, on its behalf).

        Continues ``op_id`` after the largest one in the file and terminates a truncated last
        line (a crash mid-write) so the next line starts cleanly: the fragment gets its newline
        and, when it does not parse, a :data:`~.jsonl.TORN_LINE_MARKER` line after it, so
        compaction knows it for a torn line (skipped with a note), not garbage.  Added for the
        workload's crash faults; backward compatible.
        """
        path = Path(run_dir) / "history" / f"{process}.jsonl"
        last = -1
        if path.exists():
            data = path.read_bytes()
            for line in data.splitlines():
                try:
                    last = max(last, int(json.loads(line)["op_id"]))
                except (ValueError, KeyError, TypeError):
                    continue
            if data and not data.endswith(b"\n"):
                tail = data[data.rfind(b"\n") + 1 :]
                with path.open("ab") as fh:
                    fh.write(b"\n")
                    try:
                        json.loads(tail)
                    except ValueError:  # torn mid-write (UnicodeDecodeError is one too)
                        fh.write(json.dumps(TORN_LINE_MARKER).encode() + b"\n")
        w = cls(run_dir, process, **kwargs)
        w._next_op = last + 1
        return w

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- internals ------------------------------------------------------------------------

    def _line(
        self,
        op: Op,
        outcome: str | None,
        complete_ns: int | None,
        error: str | None,
        items: list[dict[str, Any]],
    ) -> str:
        obj: dict[str, Any] = {
            "process": self.process,
            "op_id": op.op_id,
            "type": op.type,
            "invoke_ns": op.invoke_ns,
        }
        if outcome is not None:
            obj["outcome"] = outcome
            obj["complete_ns"] = complete_ns
        if error is not None:
            obj["error"] = error
        obj.update(op.fields)
        if items:
            obj["items"] = items
        return json.dumps(obj, separators=(",", ":")) + "\n"

    def _write(self, line: str, force_flush: bool) -> None:
        self._fh.write(line)
        self._pending += 1
        if force_flush or self._pending >= self._flush_every:
            self._flush()

    def _flush(self) -> None:
        if self._fh.closed:
            return
        self._fh.flush()
        if self._fsync:
            os.fsync(self._fh.fileno())
        self._pending = 0
