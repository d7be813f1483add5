"""What a checker is: a module with a name, the anomaly kinds it reports, the inputs it reads
and a ``check`` function; the registry (registry.py) lists them and derives the schedule."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .base import CheckOutput
    from .context import CheckContext


class Reads(StrEnum):
    """An input a checker reads: a shared projection (projections.py) or a file of the run."""

    #: per record value: its writes, reads and places (``proj.values``, ``proj.placements``)
    VALUES = "values"
    #: per (topic, partition, offset): the values seen there (``proj.offsets``)
    OFFSETS = "offsets"
    #: per consumer and partition, in op order: reads and committed writes (``proj.stream``)
    STREAM = "stream"
    #: per consumer, partition and epoch: the offsets read (``proj.spans``)
    SPANS = "spans"
    #: per transaction: its fate (``proj.txns``; small, no shuffle of the history)
    TRANSACTIONS = "transactions"
    METRICS = "metrics"
    FINAL_STATE = "final_state"
    FAULTS = "faults"


#: projections made by shuffling the history by record value, and by stream
BY_VALUE = frozenset({Reads.VALUES, Reads.OFFSETS})
BY_STREAM = frozenset({Reads.STREAM, Reads.SPANS})


class Checker(Protocol):
    """One checker module (see analysis/checkers/aborted_read.py for a short one)."""

    @property
    def NAME(self) -> str: ...

    @property
    def KINDS(self) -> tuple[str, ...]: ...

    @property
    def READS(self) -> frozenset[Reads]: ...

    def check(self, ctx: CheckContext) -> CheckOutput: ...
