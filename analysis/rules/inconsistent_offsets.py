"""Inconsistent offsets: one (topic, partition, offset) held different values across producer
acks and consumer reads — two different records claimed the same place in the log.
Count: distinct offsets."""

from __future__ import annotations

from ..model.facts import RunFacts
from ..model.indexes import (
    Indexes,
    observation_struct,
)
from ..model.judged import Judged, row

NAME = "inconsistent_offsets"
KINDS: tuple[str, ...] = ("inconsistent_offset",)


def rule(ix: Indexes, facts: RunFacts) -> Judged:
    """A place observed holding more than one value (across acks and reads).  One row per
    place; evidence: the least value's least observation and the greatest's greatest."""
    out = Judged(NAME, KINDS)
    for (topic, part, off), ps in ix.values_at.items():
        if len(ps) < 2:
            continue
        lo = min(ps, key=lambda p: (p.value, p.lo.order)).lo
        hi = max(ps, key=lambda p: (p.value, p.hi.order)).hi
        ev = {
            "topic": topic,
            "partition": part,
            "offset": off,
            "observations": [observation_struct(lo), observation_struct(hi)],
        }
        out.rows.append(row(out.name, "inconsistent_offset", min(lo.t, hi.t), ev))
    return out
