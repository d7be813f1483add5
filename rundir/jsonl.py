"""Strict reading of the run directory's JSON Lines files (history, metrics, fault log).

Every line must be a JSON object whose fields have the documented types.  Exactly two kinds
of damage are normal and skipped with a note (never silently):

* a **torn final line**: the writer was killed mid-write, so the file's last line has no
  trailing newline, does not parse, and is the start of an object (``{...``);
* a **torn line the writer resumed after**: :meth:`HistoryWriter.resume` ends such a fragment
  with a newline and writes :data:`TORN_LINE_MARKER` on the next line, so the fragment is
  known for what it is wherever it ends up in the file.

Anything else — garbage in the middle, a line of the wrong shape or types, a binary or
unreadable file — raises :class:`CorruptLineError` naming the file and line: a verdict over a
history with lines silently dropped could not be trusted.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pyarrow as pa

from .run_dir import RunDirError

#: the key of the line :meth:`HistoryWriter.resume` writes right after a torn line it ended
TORN_LINE_MARKER_KEY = "torn_line_above"
TORN_LINE_MARKER = {TORN_LINE_MARKER_KEY: True}

_INT_BOUNDS = {
    pa.int64(): (-(1 << 63), (1 << 63) - 1),
    pa.int32(): (-(1 << 31), (1 << 31) - 1),
}


class CorruptLineError(RunDirError):
    """A line (or the whole file) of a JSON Lines file cannot be read as what it should be."""

    def __init__(self, path: Path, line: int | None, problem: str) -> None:
        self.path = path
        self.line = line
        where = f"{path}:{line}" if line is not None else str(path)
        super().__init__(f"{where}: {problem}")


class LineProblem(ValueError):
    """What is wrong with one line (the reader adds the file and line number)."""


def read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise CorruptLineError(path, None, f"cannot be read: {e.strerror or e}") from None


def _snippet(raw: bytes, limit: int = 40) -> str:
    text = raw[:limit].decode("utf-8", errors="replace")
    return repr(text) + ("..." if len(raw) > limit else "")


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise LineProblem(f"field {key!r} appears twice")
        obj[key] = value
    return obj


def parse_line(raw: bytes) -> Any:
    """One line as JSON; :class:`LineProblem` saying why not."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        bad = f"byte 0x{raw[e.start]:02x} at column {e.start + 1}"
        raise LineProblem(f"not UTF-8 text ({bad})") from None
    try:
        return json.loads(text, object_pairs_hook=_reject_duplicates)
    except json.JSONDecodeError as e:
        raise LineProblem(f"not JSON ({e.msg} at column {e.colno}): {_snippet(raw)}") from None


def _is_torn_fragment(raw: bytes) -> bool:
    """The start of an object cut off mid-write (what a killed writer leaves)."""
    if not raw.lstrip().startswith(b"{"):
        return False
    try:
        parse_line(raw)
    except LineProblem:
        return True
    return False


def split_torn_tail(path: Path, data: bytes, notes: list[str]) -> bytes:
    """``data`` without a torn final line (noted in ``notes``), ending in a newline.

    A final line without its newline that *does* parse is complete and kept; one that neither
    parses nor starts an object (a binary file, garbage) is kept too, for the line-by-line
    reader to report (after any bad line before it)."""
    if not data or data.endswith(b"\n"):
        return data
    cut = data.rfind(b"\n")
    tail = data[cut + 1 :]
    if not tail.strip():
        return data[: cut + 1]
    if _is_torn_fragment(tail):
        line = data.count(b"\n") + 1
        notes.append(
            f"{path}:{line}: torn final line skipped ({len(tail)} bytes without a newline: "
            "the writer stopped mid-write)"
        )
        return data[: cut + 1]
    return data + b"\n"


def iter_objects(path: Path, data: bytes, notes: list[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` for every line of ``data`` (a whole file), strictly.

    Blank lines carry nothing and are passed over; torn lines are skipped with a note (see the
    module docstring); anything else that is not a JSON object raises
    :class:`CorruptLineError`."""
    lines = split_torn_tail(path, data, notes).split(b"\n")
    pending: tuple[int, bytes, LineProblem] | None = None  # an unparsable line: torn if marked
    for index, raw in enumerate(lines):
        number = index + 1
        if not raw.strip():
            if pending is not None:
                raise CorruptLineError(path, pending[0], str(pending[2]))
            continue
        try:
            obj = parse_line(raw)
        except LineProblem as e:
            if pending is not None:
                raise CorruptLineError(path, pending[0], str(pending[2])) from None
            pending = (number, raw, e)
            continue
        if isinstance(obj, dict) and obj.get(TORN_LINE_MARKER_KEY) is True:
            if pending is not None:
                notes.append(
                    f"{path}:{pending[0]}: torn line skipped ({len(pending[1])} bytes: the "
                    "writer was stopped mid-write and its history resumed after it)"
                )
                pending = None
            continue
        if pending is not None:
            raise CorruptLineError(path, pending[0], str(pending[2]))
        if not isinstance(obj, dict):
            raise CorruptLineError(
                path, number, f"expected a JSON object, got {_json_kind(obj)}: {_snippet(raw)}"
            )
        yield number, obj
    if pending is not None:
        raise CorruptLineError(path, pending[0], str(pending[2]))


def _json_kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_value(name: str, value: Any, kind: pa.DataType | type, *, nullable: bool = True) -> None:
    """``value`` (from JSON) is of ``kind`` (an Arrow type of the schema, or ``dict``/``list``);
    :class:`LineProblem` naming the field and value if not."""
    if value is None:
        if not nullable:
            raise LineProblem(f"required field {name!r} is missing or null")
        return
    want: str
    if kind is dict or kind is list:
        ok = isinstance(value, kind)
        want = "an object" if kind is dict else "an array"
    elif isinstance(kind, pa.DataType) and kind in _INT_BOUNDS:
        low, high = _INT_BOUNDS[kind]
        ok = isinstance(value, int) and not isinstance(value, bool) and low <= value <= high
        want = f"an integer ({kind})"
    elif kind == pa.float64():
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        want = "a number"
    elif kind == pa.string():
        ok = isinstance(value, str)
        want = "a string"
    elif kind == pa.bool_():
        ok = isinstance(value, bool)
        want = "true or false"
    else:
        raise TypeError(f"no JSON check for {kind}")
    if not ok:
        raise LineProblem(f"field {name!r} should be {want}, got {_show(value)}")


def check_finite(name: str, value: float) -> None:
    if not math.isfinite(value):
        raise LineProblem(f"field {name!r} should be a finite number, got {value}")


def check_fields(obj: Mapping[str, Any], spec: Mapping[str, tuple[Any, bool]]) -> None:
    """Every field of ``spec`` (``name -> (kind, nullable)``) has its kind in ``obj``."""
    for name, (kind, nullable) in spec.items():
        check_value(name, obj.get(name), kind, nullable=nullable)
