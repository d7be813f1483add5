"""What a checker produces, and the uniform anomaly row every checker emits.

An anomaly row is ``(checker, kind, time_ns, weight, evidence)``: ``weight`` is how many
anomalies the row stands for (usually 1; a skipped-offsets span counts each skipped record),
``evidence`` is a JSON object with the smallest set of records, operations and times that shows
the anomaly.  Spark-side checkers return a DataFrame of such rows; checkers over small inputs
(final state, metrics) return Python dicts of the same shape.

Detection runs on numbers (see projections.py), so some evidence — the records themselves, as
structs of the operations that wrote or read them — is filled in afterwards, for the example
rows only: a checker marks such fields :data:`LATER` and gives a :class:`Refine`, which names
the values and places whose exact records it needs (``needs``) and then fills the fields in from
them (``apply``).  The pipeline gathers every checker's needs into one small Spark job.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

ANOMALY_COLUMNS = ("checker", "kind", "time_ns", "weight", "evidence")
#: placeholder of an evidence field that :class:`Refine` fills in (keeps the field's position)
LATER = "(filled in for examples)"
#: the history columns that name one record of one operation in evidence (which process and
#: operation, which of its items, and where it went)
OP_ITEM = ("process", "op_id", "item", "type", "topic", "partition")
#: the fields of a read in a checker's evidence (``first_read``, ``read``), in this order
READ_EVIDENCE = ("process", "op_id", "type", "t", "topic", "partition", "offset")
Place = tuple[str, int, int]  #: (topic, partition, offset)


@dataclass
class Exact:
    """Exact records, as JSON-ready dicts: per value ``wr`` (its greatest write), ``first_read``,
    ``loc_min`` and ``loc_max`` (least and greatest observation with an offset); per place
    ``v_min`` and ``v_max`` (least and greatest observation).  Absent fields are null."""

    values: dict[str, dict[str, Any]] = field(default_factory=dict)
    places: dict[Place, dict[str, Any]] = field(default_factory=dict)

    def value(self, value: str, what: str) -> Any:
        return self.values.get(value, {}).get(what)

    def place(self, place: Place, what: str) -> Any:
        return self.places.get(place, {}).get(what)


@dataclass
class Refine:
    #: (ctx, examples) -> (values, places) whose exact records the examples need
    needs: Callable[[Any, list[dict[str, Any]]], tuple[set[str], set[Place]]]
    #: (example evidence, exact records) -> None: replaces the LATER fields
    apply: Callable[[dict[str, Any], Exact], None]


def fields_of(struct: str, names: Sequence[str]) -> Column:
    """The struct of ``struct``'s fields ``names``, in that order (an evidence object)."""
    return F.struct(*(F.col(f"{struct}.{name}") for name in names))


def fill(evidence: dict[str, Any], key: str, value: Any) -> None:
    """Set a LATER field; drop it when null (as to_json drops null fields)."""
    if value is None:
        evidence.pop(key, None)
    else:
        evidence[key] = value


@dataclass
class CheckOutput:
    name: str
    kinds: tuple[str, ...]
    frames: list[DataFrame] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    unknown: str | None = None  #: reason the checker could not judge this run
    notes: list[str] = field(default_factory=list)
    checked: dict[str, int] = field(default_factory=dict)
    refine: Refine | None = None  #: fills LATER evidence fields of the examples


def anomalies(
    df: DataFrame,
    checker: str,
    kind: str | Column,
    time: Column,
    evidence: dict[str, Column],
    weight: Column | None = None,
) -> DataFrame:
    """Project ``df`` onto the anomaly row shape (``kind``: a name, or a column naming each
    row's kind, for one frame that yields several kinds)."""
    return df.select(
        F.lit(checker).alias("checker"),
        (F.lit(kind) if isinstance(kind, str) else kind).alias("kind"),
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
