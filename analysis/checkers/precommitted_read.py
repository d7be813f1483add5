"""Precommitted read: a record was returned to a read_committed reader before its
transaction's commit was even requested: the read completed before the commit operation was
invoked. Count: distinct records (values) whose first read precedes their commit's invocation."""

from __future__ import annotations

from pyspark.sql import functions as F

from ..projections import COMMITTED, INDETERMINATE
from .base import CheckOutput, anomalies, definition
from .context import CheckContext

NAME = "precommitted_read"


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), ("precommitted_read",))
    if not ctx.has_reads:
        out.unknown = "no read_committed reads in the history"
        return out
    v = ctx.proj.values.filter(
        (F.col("n_r") > 0)
        & F.col("status").isin(COMMITTED, INDETERMINATE)
        & (F.col("first_read.t") < F.col("commit_invoke_ns"))
    )
    out.frames.append(
        anomalies(
            v,
            NAME,
            "precommitted_read",
            F.col("first_read.t"),
            {
                "value": F.col("value"),
                "transaction": F.struct(F.col("writer"), F.col("vtxn").alias("txn")),
                "first_read": F.col("first_read"),
                "commit_invoked_ns": F.col("commit_invoke_ns"),
                "read_early_by_ms": (F.col("commit_invoke_ns") - F.col("first_read.t")) / 1e6,
            },
        )
    )
    return out
