"""Fenced commit: a transactional producer instance's commit was acknowledged although a newer
instance of its transactional id had already initialised. An instance is a process's latest
successful init (InitProducerId) of that id before the commit; it is fenced once another
process's init of the same id, invoked after the instance's init completed, has completed:
from then on the coordinator refuses the old epoch, so no commit invoked later may succeed
(a zombie's commit). Transactional ids that prepared a two-phase commit (KIP-939, where a new
instance completes the old one's prepared transaction on purpose) are not judged.
Count: acknowledged commits."""

from __future__ import annotations

from pyspark.sql import functions as F

from ...harness.history.schema import EventType, Outcome
from .base import CheckOutput, anomalies, definition
from .context import CheckContext
from .protocol import Reads

NAME = "fenced_commit"
KINDS: tuple[str, ...] = ("fenced_commit",)
READS = frozenset({Reads.TRANSACTIONS})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, definition(__doc__), KINDS)
    h = ctx.data.history
    tid = F.col("transactional_id")
    ok = F.col("outcome") == Outcome.OK.value
    inits = h.filter((F.col("type") == EventType.INIT.value) & ok & tid.isNotNull()).select(
        "transactional_id",
        "process",
        F.col("invoke_ns").alias("i_inv"),
        F.col("complete_ns").alias("i_done"),
    )
    two_phase = (
        h.filter((F.col("type") == EventType.PREPARE.value) & tid.isNotNull())
        .select("transactional_id")
        .distinct()
    )
    commits = (
        h.filter((F.col("type") == EventType.COMMIT.value) & ok & tid.isNotNull())
        .select(
            "transactional_id",
            "process",
            "op_id",
            "txn",
            F.col("invoke_ns").alias("c_inv"),
            F.col("complete_ns").alias("c_done"),
        )
        .join(two_phase, "transactional_id", "left_anti")
    )
    out.checked["commits"] = commits.count()
    key = ["transactional_id", "process", "op_id", "txn", "c_inv", "c_done"]
    own = (
        commits.join(inits, ["transactional_id", "process"])
        .filter(F.col("i_done") <= F.col("c_inv"))
        .groupBy(*key)
        .agg(F.max(F.struct("i_done", "i_inv")).alias("own"))
    )
    q = inits.select(
        "transactional_id",
        F.col("process").alias("q_process"),
        F.col("i_inv").alias("q_inv"),
        F.col("i_done").alias("q_done"),
    )
    fenced = (
        own.join(q, "transactional_id")
        .filter(
            (F.col("q_process") != F.col("process"))
            & (F.col("q_inv") > F.col("own.i_done"))
            & (F.col("q_done") < F.col("c_inv"))
        )
        .groupBy(*key, "own")
        .agg(F.min(F.struct("q_done", "q_process", "q_inv")).alias("newer"))
    )
    out.frames.append(
        anomalies(
            fenced,
            NAME,
            "fenced_commit",
            F.col("c_done"),
            {
                "transactional_id": F.col("transactional_id"),
                "commit": F.struct(
                    F.col("process"),
                    F.col("txn"),
                    F.col("c_inv").alias("invoke_ns"),
                    F.col("c_done").alias("complete_ns"),
                ),
                "instance_init": F.struct(
                    F.col("process"),
                    F.col("own.i_inv").alias("invoke_ns"),
                    F.col("own.i_done").alias("complete_ns"),
                ),
                "newer_init": F.struct(
                    F.col("newer.q_process").alias("process"),
                    F.col("newer.q_inv").alias("invoke_ns"),
                    F.col("newer.q_done").alias("complete_ns"),
                ),
            },
        )
    )
    return out
