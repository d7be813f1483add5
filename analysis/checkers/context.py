"""What every checker gets: the loaded run, the shared projections, and cheap facts about it."""

from __future__ import annotations

from dataclasses import dataclass, field

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
        return self.type_counts.get("poll", 0) + self.type_counts.get("final_read", 0) > 0

    @property
    def has_final_read(self) -> bool:
        return self.type_counts.get("final_read", 0) > 0
