"""What every checker gets: the loaded run, the shared projections, and cheap facts about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ....rundir.schema import EventType

if TYPE_CHECKING:  # projections.py reads the ordering checker's rule: no import cycle
    from ..load import RunData
    from ..projections import Projections


@dataclass
class CheckContext:
    data: RunData
    proj: Projections
    type_counts: dict[str, int] = field(default_factory=dict)  #: ops per event type
    examples: int = 5

    @property
    def has_reads(self) -> bool:
        reads = (EventType.POLL, EventType.FINAL_READ)
        return sum(self.type_counts.get(t.value, 0) for t in reads) > 0

    @property
    def has_final_read(self) -> bool:
        return self.type_counts.get(EventType.FINAL_READ.value, 0) > 0
