"""The Spark implementation of rules/inconsistent_offsets.py (whose docstring is the definition):
places holding more than one value in the per-offset projection
(``proj.offsets``)."""

from __future__ import annotations

from pyspark.sql import functions as F

from ...rules import inconsistent_offsets
from ..projections import place_offset
from .base import CheckOutput, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = inconsistent_offsets
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.VALUES, Reads.OFFSETS})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    proj = ctx.proj
    bad = proj.offsets.filter(F.col("n_values") > 1).select("tp", "place")
    # the least and greatest observation there (by value, role, process, op_id, t), from the
    # placements of the few offsets found
    p = proj.placements.join(F.broadcast(bad), "place")
    o = p.groupBy("tp", "place").agg(
        F.min(F.struct("value", "least_obs", "least_obs_ns")).alias("lo"),
        F.max(F.struct("value", "greatest_obs", "greatest_obs_ns")).alias("hi"),
    )
    out.frames.append(
        anomalies(
            o,
            NAME,
            "inconsistent_offset",
            F.least(F.col("lo.least_obs_ns"), F.col("hi.greatest_obs_ns")),
            {
                "topic": proj.tp_topic(F.col("tp")),
                "partition": proj.tp_partition(F.col("tp")),
                "offset": place_offset(F.col("place")),
                "observations": F.array(
                    proj.observation_struct(
                        F.col("lo.value"), F.col("lo.least_obs"), F.col("lo.least_obs_ns")
                    ),
                    proj.observation_struct(
                        F.col("hi.value"), F.col("hi.greatest_obs"), F.col("hi.greatest_obs_ns")
                    ),
                ),
            },
        )
    )
    return out
