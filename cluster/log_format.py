"""The node's log lines: one event, one line. A message carrying text from a client (a
transactional id, a group id, a topic name) has its control characters escaped, so a
newline in an id cannot forge a log line (issue 35); tracebacks keep their lines."""

from __future__ import annotations

import logging


def escape_controls(text: str) -> str:
    """``text`` with every non-printable character written as its escape (``\\n``,
    ``\\x1b``, ...)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class EscapingFormatter(logging.Formatter):
    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = escape_controls(record.message)
        return super().formatMessage(record)


def use_escaping_formatter(fmt: str) -> None:
    """Give every handler of the root logger an :class:`EscapingFormatter` of ``fmt``."""
    for handler in logging.getLogger().handlers:
        handler.setFormatter(EscapingFormatter(fmt))
