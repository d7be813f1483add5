"""The Spark implementation of rules/lost_write.py (whose docstring is the definition):
committed, written values never read, whose write's partition a final
read covered or whose offset is below the highest offset read there: the per-value projection
joined to the per-partition read extent of the stream projection."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ...rules import lost_write
from ..projections import COMMITTED, FAIL_CODE
from .base import LATER, CheckOutput, Exact, Refine, anomalies, fill
from .context import CheckContext
from .protocol import Reads

RULE = lost_write
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES, Reads.STREAM})


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    return {e["evidence"]["value"] for e in examples}, set()


def _apply(ev: dict[str, Any], exact: Exact) -> None:
    fill(ev, "write", exact.value(ev["value"], "wr"))


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS, refine=Refine(_needs, _apply))
    if not ctx.has_reads:
        out.unknown = "no reads in the history, so no write can be shown lost"
        return out
    if not ctx.has_final_read:
        out.notes.append("no final read: only writes below offsets that were read are checked")
    v = ctx.proj.values.filter(
        (F.col("status") == COMMITTED)
        & (F.col("n_writes") > 0)
        & (F.col("n_reads") == 0)
        & (F.col("write_outcome") != FAIL_CODE)
    )
    p = F.broadcast(ctx.proj.partition_reads)
    j = v.join(p, v["write_tp"] == p["tp"], "left")
    covered = F.coalesce(F.col("has_final"), F.lit(False)) | (
        F.col("write_offset") < F.col("max_read_offset")
    )
    lost = j.filter(covered)
    out.frames.append(
        anomalies(
            lost,
            NAME,
            "lost_write",
            F.col("write_ns"),
            {
                "value": F.col("value"),
                "transaction": F.struct(F.col("writer"), F.col("value_txn").alias("txn")),
                "write": F.lit(LATER),
                "commit_invoked_ns": F.col("commit_invoke_ns"),
                "partition_max_read_offset": F.col("max_read_offset"),
                "final_read_covered_partition": F.col("has_final"),
            },
        )
    )
    return out
