"""The Spark implementation of rules/aborted_read.py (whose docstring is the definition):
the values read although their transaction did not commit: a filter of the
per-value projection (``proj.values``: reads, writes and transaction status per value)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ...model.judged import NO_READS
from ...rules import aborted_read
from ..projections import NOT_COMMITTED
from .base import LATER, CheckOutput, Exact, Refine, anomalies, fill
from .context import CheckContext
from .protocol import Reads

RULE = aborted_read
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES})


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    return {e["evidence"]["value"] for e in examples}, set()


def _apply(ev: dict[str, Any], exact: Exact) -> None:
    fill(ev, "written", exact.value(ev["value"], "wr"))
    fill(ev, "first_read", exact.value(ev["value"], "first_read"))


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS, refine=Refine(_needs, _apply))
    if not ctx.has_reads:
        out.unknown = NO_READS
        return out
    v = ctx.proj.values.filter((F.col("n_reads") > 0) & F.col("status").isin(NOT_COMMITTED))
    out.frames.append(
        anomalies(
            v,
            NAME,
            "aborted_read",
            F.col("first_read_ns"),
            {
                "value": F.col("value"),
                "transaction": F.struct(
                    F.col("writer"), F.col("value_txn").alias("txn"), F.col("status")
                ),
                "written": F.lit(LATER),
                "first_read": F.lit(LATER),
                "times_read": F.col("n_reads"),
            },
        )
    )
    return out
