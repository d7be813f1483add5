"""Aborted read: a read_committed consumer (or the final read) returned a record whose
transaction aborted or never committed. A transaction is aborted when an abort was acknowledged,
its commit definitely failed, or an abort was attempted without a commit; it never committed
when no commit or abort was recorded at all (e.g. its writer crashed). Records of transactions
whose commit outcome is unknown are left to the indeterminate-commit checker. Count: distinct
records (values) so returned."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ..projections import NOT_COMMITTED
from .base import LATER, CheckOutput, Exact, Refine, anomalies, definition, fill
from .context import CheckContext
from .protocol import Reads

NAME = "aborted_read"
KINDS: tuple[str, ...] = ("aborted_read",)
READS = frozenset({Reads.VALUES})


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    return {e["evidence"]["value"] for e in examples}, set()


def _apply(ev: dict[str, Any], exact: Exact) -> None:
    fill(ev, "written", exact.value(ev["value"], "wr"))
    fill(ev, "first_read", exact.value(ev["value"], "first_read"))


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), KINDS, refine=Refine(_needs, _apply))
    if not ctx.has_reads:
        out.unknown = "no read_committed reads in the history"
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
