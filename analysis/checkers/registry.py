"""Every checker, and the schedule the pipeline derives from what each one reads.

Adding a checker: a module beside the others (NAME, KINDS, READS, ``check``; see protocol.py)
and one line in :data:`CHECKERS`.  The pipeline builds the projections the checkers read and
groups the checkers by them; nothing else lists checkers.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import (
    aborted_read,
    committed_offsets,
    consume_transform_produce,
    dual_write,
    duplicate,
    fenced_commit,
    hanging_transactions,
    inconsistent_offsets,
    indeterminate_commit,
    lost_write,
    metrics,
    ordering,
    precommitted_read,
    refused_request,
    torn_transaction,
)
from .protocol import BY_STREAM, BY_VALUE, Checker

#: every checker, in the order verdicts list them
CHECKERS: tuple[Checker, ...] = (
    aborted_read,
    precommitted_read,
    lost_write,
    duplicate,
    inconsistent_offsets,
    ordering,
    torn_transaction,
    consume_transform_produce,
    indeterminate_commit,
    fenced_commit,
    committed_offsets,
    refused_request,
    hanging_transactions,
    dual_write,
    metrics,
)


@dataclass(frozen=True)
class Schedule:
    """How the pipeline runs the checkers: ``side`` beside the two shuffles of the history
    (they read neither), then ``groups`` at once, each with its own anomaly job: what reads
    the streams, and what reads only the values.  ``by_value``/``by_stream``: whether those
    shuffles are needed at all."""

    side: tuple[Checker, ...]
    groups: tuple[tuple[Checker, ...], ...]
    by_value: bool
    by_stream: bool


def schedule(checkers: tuple[Checker, ...] = CHECKERS) -> Schedule:
    """The :class:`Schedule` of ``checkers``, from what each one reads."""
    shuffled = BY_VALUE | BY_STREAM
    side = tuple(c for c in checkers if not c.READS & shuffled)
    streams = tuple(c for c in checkers if c.READS & BY_STREAM)
    values = tuple(c for c in checkers if c.READS & BY_VALUE and not c.READS & BY_STREAM)
    return Schedule(
        side=side,
        groups=tuple(g for g in (streams, values) if g),
        by_value=any(c.READS & BY_VALUE for c in checkers),
        by_stream=any(c.READS & BY_STREAM for c in checkers),
    )
