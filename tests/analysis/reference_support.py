"""Both engines over one run directory: every anomaly row of the Spark checkers (evidence
filled in for every row, not only for examples) beside the reference checkers' rows."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from txnchaos.analysis.load import prepare_run
from txnchaos.analysis.reference import judge
from txnchaos.analysis.spark.checkers.base import CheckOutput, Exact
from txnchaos.analysis.spark.checkers.context import CheckContext
from txnchaos.analysis.spark.load import load_run
from txnchaos.analysis.spark.pipeline import CHECKERS
from txnchaos.analysis.spark.projections import Projections
from txnchaos.analysis.spark.summary import summarize

#: the Spark checkers the reference covers: all of them
SPARK_CHECKERS = CHECKERS
EXACT = ("wr", "first_read", "loc_min", "loc_max")

Judgement = dict[str, tuple[str | None, list[dict[str, Any]]]]


def _fill_evidence(
    ctx: CheckContext, outputs: list[CheckOutput], rows: list[dict[str, Any]]
) -> None:
    """Every row's LATER evidence fields filled in, as the pipeline fills its examples'."""
    todo, values, places = [], set(), set()
    for o in outputs:
        mine = [r for r in rows if r["checker"] == o.name]
        if o.refine is None or not mine:
            continue
        v, p = o.refine.needs(ctx, mine)
        values |= v
        places |= p
        todo.append((o.refine, mine))
    exact = Exact()
    if values:
        cols = (F.to_json(c).alias(c) for c in EXACT)
        for r in ctx.proj.exact_values(sorted(values)).select("value", *cols).collect():
            exact.values[r["value"]] = {c: r[c] and json.loads(r[c]) for c in EXACT}
    if places:
        cols = (F.to_json(c).alias(c) for c in ("v_min", "v_max"))
        for r in (
            ctx.proj.exact_offsets(sorted(places))
            .select("topic", "partition", "offset", *cols)
            .collect()
        ):
            key = (r["topic"], r["partition"], r["offset"])
            exact.places[key] = {c: json.loads(r[c]) for c in ("v_min", "v_max")}
    for refine, mine in todo:
        for r in mine:
            refine.apply(r["evidence"], exact)


def spark_judgement(spark: SparkSession, run_dir: Path) -> Judgement:
    """Per checker: (unknown reason, every anomaly row) from the Spark checkers."""
    data = load_run(spark, prepare_run(run_dir))
    summary = summarize(data.history)
    proj = Projections(data, summary)
    ctx = CheckContext(data, proj, summary.type_counts)
    try:
        outputs = [mod.check(ctx) for mod in SPARK_CHECKERS]
        framed = []
        for o in outputs:
            for f in o.frames:
                for r in f.collect():
                    d = r.asDict()
                    d["evidence"] = json.loads(d["evidence"])
                    framed.append(d)
        _fill_evidence(ctx, outputs, framed)
        out: Judgement = {o.name: (o.unknown, list(o.rows)) for o in outputs}
        for r in framed:
            out[r["checker"]][1].append(r)
        return out
    finally:
        proj.release()


def reference_judgement(run_dir: Path) -> Judgement:
    return {name: (j.unknown, j.rows) for name, j in judge(run_dir).items()}


def canonical(j: Judgement) -> dict[str, tuple[str | None, list[str]]]:
    """Rows as sorted JSON strings (order-free, dict-key-order-free comparison)."""
    return {
        name: (unknown, sorted(json.dumps(r, sort_keys=True) for r in rows))
        for name, (unknown, rows) in j.items()
    }


def counts(j: Judgement) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for name, (_, rows) in j.items():
        c = out.setdefault(name, {})
        for r in rows:
            c[r["kind"]] = c.get(r["kind"], 0) + int(r["weight"])
    return out
