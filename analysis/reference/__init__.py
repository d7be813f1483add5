"""Reference checkers: each Spark checker's rule as a short pure function over a history's
named indexes, returning the same anomaly rows (the readable specification of the analysis;
tests hold Spark and reference to agree).  Entry point: :func:`judge`."""

from .hanging import RunFacts, hanging_transactions
from .history import Item, Op, ops_from_flat, read_history
from .indexes import Indexes
from .judge import HISTORY_CHECKERS, judge, judge_indexes, run_facts
from .metrics import metrics
from .rows import Judged

__all__ = [
    "HISTORY_CHECKERS",
    "Indexes",
    "Item",
    "Judged",
    "Op",
    "RunFacts",
    "hanging_transactions",
    "judge",
    "judge_indexes",
    "metrics",
    "ops_from_flat",
    "read_history",
    "run_facts",
]
