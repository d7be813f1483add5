"""Precommitted read: a record was returned to a read_committed reader before its
transaction's commit was even requested: the read completed before the commit operation was
invoked. Count: distinct records (values) whose first read precedes their commit's invocation."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ..projections import COMMITTED, INDETERMINATE
from .base import LATER, CheckOutput, Exact, Refine, anomalies, definition, fill
from .context import CheckContext
from .protocol import Reads

NAME = "precommitted_read"
KINDS: tuple[str, ...] = ("precommitted_read",)
READS = frozenset({Reads.VALUES})


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    return {e["evidence"]["value"] for e in examples}, set()


def _apply(ev: dict[str, Any], exact: Exact) -> None:
    fill(ev, "first_read", exact.value(ev["value"], "first_read"))


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), KINDS, refine=Refine(_needs, _apply))
    if not ctx.has_reads:
        out.unknown = "no read_committed reads in the history"
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
