"""parse_value finds a value's writer and transaction by position; it must agree with splitting
the value on ``|`` (what it replaced) for any string, including multi-byte characters."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F

from txnchaos.analysis.spark.projections import parse_value


def _by_split(value: Column) -> tuple[Column, Column, Column]:
    parts = F.split(value, r"\|")
    ok = F.size(parts) == 3
    txn_s = parts.getItem(1)
    return (
        F.when(ok, parts.getItem(0)),
        F.when(ok & (txn_s != F.lit("-")), txn_s.try_cast("long")),
        ok,
    )


def _compare(spark: SparkSession, values: list[str]) -> list[tuple[object, ...]]:
    df = spark.createDataFrame([(v,) for v in values], "value string")
    got = parse_value(F.col("value"))
    want = _by_split(F.col("value"))
    rows = df.select(
        "value",
        *(c.alias(f"got{i}") for i, c in enumerate(got)),
        *(c.alias(f"want{i}") for i, c in enumerate(want)),
    ).collect()
    return [
        (r["value"], r[f"got{i}"], r[f"want{i}"])
        for r in rows
        for i in range(3)
        if r[f"got{i}"] != r[f"want{i}"]
    ]


def test_parse_value_examples(spark: SparkSession) -> None:
    df = spark.createDataFrame(
        [("p-1|12|3",), ("p-é|-|0",), ("a||",), ("|x|y",), ("a|b|c|",), ("a|12",), ("ü|+7|1",)],
        "value string",
    )
    w, t, ok = parse_value(F.col("value"))
    rows = [tuple(r) for r in df.select(w, t, ok).collect()]
    assert rows == [
        ("p-1", 12, True),
        ("p-é", None, True),
        ("a", None, True),
        ("", None, True),
        (None, None, False),
        (None, None, False),
        ("ü", 7, True),
    ]


_SEGMENT = st.text(alphabet=st.sampled_from("-0123456789 +aé€𝄞"), max_size=5)
#: strings of 1-5 segments joined by "|" (values with too few, the right number, and too many
#: separators), and arbitrary strings over the same characters
_VALUES = st.one_of(
    st.lists(_SEGMENT, min_size=1, max_size=5).map("|".join),
    st.text(alphabet=st.sampled_from("|-0123456789 +aé€𝄞"), max_size=12),
)


@settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.lists(_VALUES, min_size=1, max_size=40))
def test_parse_value_agrees_with_split(spark: SparkSession, values: list[str]) -> None:
    assert _compare(spark, values) == []
