"""Lost write: a record of a transaction whose commit was acknowledged (or a non-transactional
write that was acknowledged) is missing from the reads although they cover it: either the
final read_committed read covered its partition, or it has a known offset below the highest
offset any read_committed reader returned in that partition, and yet no reader ever returned
it. Writes whose own send definitely failed are not expected. Count: distinct records."""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from ..projections import COMMITTED, FAIL_CODE
from .base import LATER, CheckOutput, Exact, Refine, anomalies, definition, fill
from .context import CheckContext
from .protocol import Reads

NAME = "lost_write"
KINDS: tuple[str, ...] = ("lost_write",)
READS = frozenset({Reads.VALUES, Reads.STREAM})


def _needs(ctx: CheckContext, examples: list[dict[str, Any]]) -> tuple[set[str], set[Any]]:
    return {e["evidence"]["value"] for e in examples}, set()


def _apply(ev: dict[str, Any], exact: Exact) -> None:
    fill(ev, "write", exact.value(ev["value"], "wr"))


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), KINDS, refine=Refine(_needs, _apply))
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
