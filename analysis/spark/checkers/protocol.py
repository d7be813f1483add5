"""What a Spark implementation of a rule is: a module naming the rule it implements (``RULE``,
whose ``NAME`` and ``KINDS`` it reports), the inputs it reads (``READS``) and a ``check``
function; schedule.py finds one for every registered rule and derives the pipeline's schedule
from what they read."""

from __future__ import annotations

from enum import StrEnum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ...rules.registry import Rule
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
    """One Spark implementation (spark/checkers/aborted_read.py is a short one)."""

    @property
    def RULE(self) -> Rule: ...

    @property
    def NAME(self) -> str: ...

    @property
    def KINDS(self) -> tuple[str, ...]: ...

    @property
    def READS(self) -> frozenset[Reads]: ...

    def check(self, ctx: CheckContext) -> CheckOutput: ...
