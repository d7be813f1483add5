"""The Spark implementation of rules/refused_request.py (whose docstring is the definition): the
few probe ops of the raw history, the accepted ones flagged, and their values joined with every
read's items to find the first read of each (by invocation time, process, op and item)."""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from ....rundir.schema import EventType, Outcome
from ...rules import refused_request
from .base import OP_ITEM, READ_EVIDENCE, CheckOutput, anomalies, fields_of
from .context import CheckContext
from .protocol import Reads

RULE = refused_request
NAME, KINDS = RULE.NAME, RULE.KINDS
#: it matches probes to reads by record value (in the raw history: probes are few)
READS: frozenset[Reads] = frozenset({Reads.VALUES})


def _probe() -> Column:
    return F.struct(
        F.col("process"),
        F.col("op_id"),
        F.col("key").alias("kind"),
        F.col("source").alias("expected"),
        F.col("outcome"),
        F.col("error"),
        F.col("transactional_id"),
        F.col("producer_id"),
        F.col("producer_epoch"),
        F.col("group_id"),
        F.col("topic"),
        F.col("partition"),
        F.col("offset"),
        F.col("value"),
        F.col("invoke_ns"),
        F.col("complete_ns"),
    )


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
    h = ctx.data.history
    probes = h.filter(F.col("type") == EventType.PROBE.value).select(
        F.col("complete_ns").alias("p_done"),
        F.col("outcome").alias("p_outcome"),
        F.col("value").alias("p_value"),
        _probe().alias("probe"),
    )
    out.checked["probes"] = probes.count()
    accepted = probes.filter(F.col("p_outcome") == Outcome.OK.value)
    out.frames.append(
        anomalies(
            accepted,
            NAME,
            "refused_request_accepted",
            F.col("p_done"),
            {"probe": F.col("probe")},
        )
    )
    reads = h.filter(
        F.col("type").isin(EventType.POLL.value, EventType.FINAL_READ.value)
        & F.col("value").isNotNull()
    ).select(
        F.col("value").alias("p_value"),
        F.struct(F.col("invoke_ns").alias("t"), *OP_ITEM, "offset").alias("r"),
    )
    seen = (
        probes.filter(F.col("p_value").isNotNull())
        .join(F.broadcast(reads.join(probes.select("p_value"), "p_value", "left_semi")), "p_value")
        .groupBy("p_value", "probe")
        .agg(F.min("r").alias("first"), F.count(F.lit(1)).alias("n"))
    )
    out.frames.append(
        anomalies(
            seen,
            NAME,
            "refused_write_visible",
            F.col("first.t"),
            {
                "probe": F.col("probe"),
                "first_read": fields_of("first", READ_EVIDENCE),
                "times_read": F.col("n"),
            },
        )
    )
    return out
