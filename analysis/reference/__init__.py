"""The plain-Python engine: every rule (rules/) over a run directory, no JVM (``judge``), and
the whole verdict of a run from them (``verdict.reference_verdict``): the test oracle every
Spark verdict is held equal to, and ``--engine reference`` for a quick look."""

from ..model.facts import RunFacts
from ..model.history import Item, Op, ops_from_flat, read_history
from ..model.indexes import Indexes
from ..model.judged import Judged
from .judge import judge, judge_indexes, run_facts

__all__ = [
    "Indexes",
    "Item",
    "Judged",
    "Op",
    "RunFacts",
    "judge",
    "judge_indexes",
    "ops_from_flat",
    "read_history",
    "run_facts",
]
