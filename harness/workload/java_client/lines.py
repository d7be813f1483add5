"""The line protocol between a workload user and its Java client process (the Java side is
``src/txnchaos/javaclient/Lines.java`` and ``Driver.java``).

To the child, one command per line: ``<seq>\\t<command>\\t<field>...``. In a field a backslash
escapes (``\\\\`` backslash, ``\\t`` tab, ``\\n`` newline, ``\\r`` carriage return) and a
field that is exactly ``\\N`` is null. From the child, one JSON object per line, of four shapes:

* ``{"ready": true, "version": "4.1.1", "two_phase": false}``: the first line, once the JVM
  runs (the kafka-clients release on its classpath, and whether it has KIP-939's API);
* ``{"re": seq, "ok": true, ...}`` / ``{"re": seq, "ok": false, "error": {...}}``: the answer
  to command ``seq`` (commands are answered in order; ``send`` is not answered);
* ``{"ack": seq, "offset": n}`` / ``{"ack": seq, "sent": bool, "error": {...}}``: the
  acknowledgement of the record sent by command ``seq`` (``sent`` false: never written);
* ``{"event": "assigned" | "revoked" | "lost", "parts": [[topic, partition], ...]}``: a
  consumer's rebalance, written before the answer of the poll it happened in.

An error is ``{"class": "fatal" | "abortable" | "retriable" | "other", "name", "message"}``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..recording import ErrorClass, Failure

NULL = "\\N"

Field = str | int | bool | None

_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


class ProtocolError(RuntimeError):
    """A line from the child that is not one of the protocol's shapes."""


def escape(value: Field) -> str:
    """One field as it travels (``None`` is ``\\N``; booleans are ``true``/``false``)."""
    if value is None:
        return NULL
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value).translate(_ESCAPES)


def command(seq: int, name: str, *fields: Field) -> str:
    """The line (with its newline) for command ``name`` numbered ``seq``."""
    return "\t".join([str(seq), escape(name), *(escape(f) for f in fields)]) + "\n"


@dataclass(frozen=True)
class JavaError:
    """A failed call as the Java client reported it."""

    error_class: ErrorClass
    name: str
    message: str

    @classmethod
    def from_json(cls, raw: Any) -> JavaError:
        if not isinstance(raw, dict):
            raise ProtocolError(f"an error is an object, got {raw!r}")
        try:
            error_class = ErrorClass(str(raw.get("class")))
        except ValueError:
            raise ProtocolError(f"unknown error class in {raw!r}") from None
        return cls(error_class, str(raw.get("name", "")), str(raw.get("message", "")))

    @property
    def failure(self) -> Failure:
        """As the history writes it: ``NAME (class): message``, like the other clients."""
        return Failure(self.error_class, f"{self.name} ({self.error_class.value}): {self.message}")


def parse(line: str) -> dict[str, Any]:
    """One line from the child, checked to be one of the protocol's shapes."""
    try:
        msg = json.loads(line)
    except ValueError:
        raise ProtocolError(f"not a protocol line: {line[:200]!r}") from None
    if not isinstance(msg, dict):
        raise ProtocolError(f"not a protocol line: {line[:200]!r}")
    if "re" in msg:
        if not isinstance(msg["re"], int) or not isinstance(msg.get("ok"), bool):
            raise ProtocolError(f"an answer needs an integer re and a boolean ok: {line[:200]!r}")
        if not msg["ok"]:
            msg["error"] = JavaError.from_json(msg.get("error"))
    elif "ack" in msg:
        if not isinstance(msg["ack"], int):
            raise ProtocolError(f"an ack needs an integer seq: {line[:200]!r}")
        if "error" in msg:
            msg["error"] = JavaError.from_json(msg["error"])
            msg["sent"] = bool(msg.get("sent", True))
        elif not isinstance(msg.get("offset"), int):
            raise ProtocolError(f"a successful ack needs an offset: {line[:200]!r}")
    elif "event" in msg:
        if msg["event"] not in ("assigned", "revoked", "lost") or not isinstance(
            msg.get("parts"), list
        ):
            raise ProtocolError(f"unknown event: {line[:200]!r}")
    elif msg.get("ready") is not True:
        raise ProtocolError(f"not a protocol line: {line[:200]!r}")
    return msg


def ids(msg: dict[str, Any]) -> tuple[int, int] | None:
    """The producer id and epoch an answer carries, if any."""
    raw = msg.get("ids")
    if isinstance(raw, list) and len(raw) == 2 and all(isinstance(v, int) for v in raw):
        return raw[0], raw[1]
    return None
