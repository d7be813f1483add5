"""What a checker produces, and the uniform anomaly row every checker emits.

An anomaly row is ``(checker, kind, time_ns, weight, evidence)``: ``weight`` is how many
anomalies the row stands for (usually 1; a skipped-offsets span counts each skipped record),
``evidence`` is a JSON object with the smallest set of records, operations and times that shows
the anomaly.  Spark-side checkers return a DataFrame of such rows; checkers over small inputs
(final state, metrics) return Python dicts of the same shape.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

ANOMALY_COLUMNS = ("checker", "kind", "time_ns", "weight", "evidence")


@dataclass
class CheckOutput:
    name: str
    definition: str
    kinds: tuple[str, ...]
    frames: list[DataFrame] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    unknown: str | None = None  #: reason the checker could not judge this run
    notes: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)


def anomalies(
    df: DataFrame,
    checker: str,
    kind: str,
    time: Column,
    evidence: dict[str, Column],
    weight: Column | None = None,
) -> DataFrame:
    """Project ``df`` onto the anomaly row shape."""
    return df.select(
        F.lit(checker).alias("checker"),
        F.lit(kind).alias("kind"),
        time.cast("long").alias("time_ns"),
        (weight if weight is not None else F.lit(1)).cast("long").alias("weight"),
        F.to_json(F.struct(*[c.alias(n) for n, c in evidence.items()])).alias("evidence"),
    )


def row(
    checker: str, kind: str, time_ns: int | None, evidence: dict[str, Any], weight: int = 1
) -> dict[str, Any]:
    return {
        "checker": checker,
        "kind": kind,
        "time_ns": time_ns,
        "weight": weight,
        "evidence": evidence,
    }


def definition(module_doc: str | None) -> str:
    """A checker's written definition: its module docstring, whitespace-normalised."""
    return " ".join((module_doc or "").split())
