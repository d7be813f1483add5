"""ListTransactions' ``transactional_id_pattern`` (KIP-664), matched as Kafka does: with
RE2 (Kafka uses RE2/J), whose matching takes time linear in the id, so a pattern such
as ``(a+)+b`` cannot freeze the coordinator's event loop (Python's backtracking ``re``
took 16.6 s on a 29-character id, long enough for the controller to fence the brokers).
A pattern RE2/J refuses gets INVALID_REGULAR_EXPRESSION with Kafka's message."""

from __future__ import annotations

import re
from collections.abc import Callable

import re2

MAX_REPEAT = 1000
"""RE2's largest repetition count; RE2/J refuses a larger one (``a{99999999999}``),
where the C++ library would read an unparsable count as literal text."""

_REPEAT = re.compile(r"(?<!\\)\{(\d+)(?:,(\d*))?\}")
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # the refusal is answered, not written to the node's log


class InvalidPattern(ValueError):
    """A pattern RE2/J would not compile; the message is Kafka's."""


def id_matcher(pattern: str) -> Callable[[str], bool]:
    """A whole-id matcher for ``pattern`` (Kafka: ``Pattern.matcher(id).matches()``)."""
    try:
        for m in _REPEAT.finditer(pattern):
            low, high = m.group(1), m.group(2)
            if int(low) > MAX_REPEAT or (high and int(high) > MAX_REPEAT):
                raise InvalidPattern(f"invalid repeat count: `{m.group(0)}`")
        compiled = re2.compile(pattern, options=_OPTIONS)
    except (re2.error, InvalidPattern) as exc:
        reason = exc.args[0] if exc.args else exc
        if isinstance(reason, bytes):
            reason = reason.decode(errors="replace")
        raise InvalidPattern(
            f"Transaction ID pattern `{pattern}` is not a valid regular expression: {reason}."
        ) from None
    return lambda txn_id: compiled.fullmatch(txn_id) is not None
