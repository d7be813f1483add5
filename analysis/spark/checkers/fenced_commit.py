"""The Spark implementation of rules/fenced_commit.py (whose docstring is the definition):
each acknowledged commit joined with its own process's inits of the id (the latest before the
commit is the instance) and then with other processes' inits completed before the commit was
invoked (the earliest-completing one is the evidence)."""

from __future__ import annotations

from pyspark.sql import functions as F

from ....rundir.schema import EventType, Outcome
from ...rules import fenced_commit
from .base import CheckOutput, anomalies
from .context import CheckContext
from .protocol import Reads

RULE = fenced_commit
NAME, KINDS = RULE.NAME, RULE.KINDS
READS = frozenset({Reads.TRANSACTIONS})


def check(ctx: CheckContext) -> CheckOutput:
    out = CheckOutput(NAME, KINDS)
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
