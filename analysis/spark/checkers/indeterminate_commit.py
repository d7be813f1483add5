"""The Spark implementation of rules/indeterminate_commit.py (whose docstring is the definition):
per unknown-outcome transaction, its written (not failed) values
counted as finally read or not: from the per-value projection."""

from __future__ import annotations

from pyspark.sql import functions as F

from ...rules import indeterminate_commit
from ..projections import FAIL_CODE, INDETERMINATE
from .base import CheckOutput, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = indeterminate_commit
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    if not ctx.has_final_read:
        out.unknown = "no final read: visibility of unknown-outcome commits cannot be judged"
        return out
    v = ctx.proj.values.filter(
        (F.col("status") == INDETERMINATE)
        & F.col("value_txn").isNotNull()
        & (F.col("n_writes") > 0)
        & (F.col("write_outcome") != FAIL_CODE)
    )
    vis = F.col("n_final_reads") > 0
    g = v.groupBy("writer", "value_txn").agg(
        F.count(F.lit(1)).alias("writes"),
        F.sum(vis.cast("int")).alias("visible"),
        F.min("commit_invoke_ns").alias("commit_invoked_ns"),
        F.slice(F.sort_array(F.collect_list(F.when(vis, F.col("value")))), 1, 3).alias(
            "visible_sample"
        ),
        F.slice(F.sort_array(F.collect_list(F.when(~vis, F.col("value")))), 1, 3).alias(
            "invisible_sample"
        ),
    )
    partial = g.filter((F.col("visible") > 0) & (F.col("visible") < F.col("writes")))
    out.frames.append(
        anomalies(
            partial,
            NAME,
            "partly_visible",
            F.col("commit_invoked_ns"),
            {
                "transaction": F.struct(F.col("writer"), F.col("value_txn").alias("txn")),
                "commit_invoked_ns": F.col("commit_invoked_ns"),
                "writes": F.col("writes"),
                "visible_in_final_read": F.col("visible"),
                "visible_sample": F.col("visible_sample"),
                "invisible_sample": F.col("invisible_sample"),
            },
        )
    )
    return out
