"""The Spark implementation of rules/precommitted_read.py (whose docstring is the definition):
the values whose first read precedes their transaction's commit
invocation: a filter of the per-value projection (``proj.values``)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ...model.judged import NO_READS
from ...rules import precommitted_read
from ..projections import COMMITTED, INDETERMINATE
from .base import LATER, CheckOutput, Exact, Refine, anomalies, fill
from .context import CheckContext
from .protocol import Reads

RULE = precommitted_read
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES})


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    return {e["evidence"]["value"] for e in examples}, set()


def _apply(ev: dict[str, Any], exact: Exact) -> None:
    fill(ev, "first_read", exact.value(ev["value"], "first_read"))


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS, refine=Refine(_needs, _apply))
    if not ctx.has_reads:
        out.unknown = NO_READS
        return out
    v = ctx.proj.values.filter(
        (F.col("n_reads") > 0)
        & F.col("status").isin(COMMITTED, INDETERMINATE)
        & (F.col("first_read_ns") < F.col("commit_invoke_ns"))
    )
    out.frames.append(
        anomalies(
            v,
            NAME,
            "precommitted_read",
            F.col("first_read_ns"),
            {
                "value": F.col("value"),
                "transaction": F.struct(F.col("writer"), F.col("value_txn").alias("txn")),
                "first_read": F.lit(LATER),
                "commit_invoked_ns": F.col("commit_invoke_ns"),
                "read_early_by_ms": (F.col("commit_invoke_ns") - F.col("first_read_ns")) / 1e6,
            },
        )
    )
    return out
