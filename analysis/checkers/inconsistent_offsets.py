"""Inconsistent offsets: one (topic, partition, offset) held different values across producer
acks and consumer reads — two different records claimed the same place in the log.
Count: distinct offsets."""

from __future__ import annotations

from pyspark.sql import functions as F

from .base import CheckOutput, anomalies, definition
from .context import CheckContext

NAME = "inconsistent_offsets"


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), ("inconsistent_offset",))
    o = ctx.proj.offsets.filter(F.col("v_min.value") != F.col("v_max.value"))
    out.frames.append(
        anomalies(
            o,
            NAME,
            "inconsistent_offset",
            F.least(F.col("v_min.t"), F.col("v_max.t")),
            {
                "topic": F.col("topic"),
                "partition": F.col("partition"),
                "offset": F.col("offset"),
                "observations": F.array(F.col("v_min"), F.col("v_max")),
            },
        )
    )
    return out
