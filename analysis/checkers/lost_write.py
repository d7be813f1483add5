"""Lost write: a record of a transaction whose commit was acknowledged (or a non-transactional
write that was acknowledged) is missing from the reads although they cover it: either the
final read_committed read covered its partition, or it has a known offset below the highest
offset any read_committed reader returned in that partition, and yet no reader ever returned
it. Writes whose own send definitely failed are not expected. Count: distinct records."""

from __future__ import annotations

from pyspark.sql import functions as F

from ..projections import COMMITTED
from .base import CheckOutput, anomalies, definition
from .context import CheckContext

NAME = "lost_write"


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), ("lost_write",))
    if not ctx.has_reads:
        out.unknown = "no reads in the history, so no write can be shown lost"
        return out
    if not ctx.has_final_read:
        out.notes.append("no final read: only writes below offsets that were read are checked")
    v = ctx.proj.values.filter(
        (F.col("status") == COMMITTED)
        & (F.col("n_w") > 0)
        & (F.col("n_r") == 0)
        & (F.col("wr.outcome") != "fail")
    )
    p = ctx.proj.partition_reads
    j = v.join(
        F.broadcast(p),
        (v["wr.topic"] == p["topic"]) & (v["wr.partition"] == p["partition"]),
        "left",
    )
    covered = F.coalesce(F.col("has_final"), F.lit(False)) | (
        F.col("wr.offset") < F.col("max_read_offset")
    )
    lost = j.filter(covered)
    out.frames.append(
        anomalies(
            lost,
            NAME,
            "lost_write",
            F.col("wr.t"),
            {
                "value": F.col("value"),
                "transaction": F.struct(F.col("writer"), F.col("vtxn").alias("txn")),
                "write": F.col("wr"),
                "commit_invoked_ns": F.col("commit_invoke_ns"),
                "partition_max_read_offset": F.col("max_read_offset"),
                "final_read_covered_partition": F.col("has_final"),
            },
        )
    )
    return out
