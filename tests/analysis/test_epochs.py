"""Epochs: a consumer may see offsets again after a rewind point of that partition (assign,
revoke, seek) or a restart of the consumer, and only then."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from tests.selection import nightly_except
from txnchaos.rundir.schema import EventType
from txnchaos_testing.synthetic import Synth

from .helpers import build, counts, judge

CONSUMER = "c0"


def _reread(synth: Synth, rewind: str | None, other_partition: bool = False) -> int:
    """``CONSUMER`` gets the first records of its first poll's partition again, at the same
    offsets, after a rewind point of kind ``rewind`` (None: none) of that partition or, with
    ``other_partition``, of another one.  Returns how many records it got again."""
    polls = [
        o for o in synth.ops if o["type"] == "poll" and o["process"] == CONSUMER and o["items"]
    ]
    first = polls[0]["items"][0]
    topic, partition = first["topic"], first["partition"]
    again = [
        dict(it) for it in polls[0]["items"] if (it["topic"], it["partition"]) == (topic, partition)
    ][:2]
    others = sorted(
        {
            (it["topic"], it["partition"])
            for o in polls
            for it in o["items"]
            if (it["topic"], it["partition"]) != (topic, partition)
        }
    )
    at: dict[str, Any] = {"topic": topic, "partition": partition}
    if other_partition:
        at = {"topic": others[0][0], "partition": others[0][1]}
    if rewind == "start":
        synth.op(CONSUMER, EventType.START)
    elif rewind is not None:
        synth.op(CONSUMER, EventType(rewind), items=[{**at, "offset": first["offset"]}])
    synth.op(
        CONSUMER,
        EventType.POLL,
        items=again,
        isolation="read_committed",
        group_id=f"g-{CONSUMER}",
    )
    return len(again)


def _config() -> dict[str, Any]:
    return {"seed": 11, "writers": 2, "partitions": 4, "consumers": 2, "txns_per_writer": 12}


#: CI judges one case of each family (a Spark analysis each); ``pytest -m nightly`` all of them
@pytest.mark.parametrize(
    "rewind", nightly_except(["seek", "assign", "revoke", "start"], keep={"seek"})
)
def test_records_seen_again_after_a_rewind_point_are_no_anomaly(
    spark: SparkSession, tmp_path: Path, rewind: str
) -> None:
    synth = build(**_config())
    assert _reread(synth, rewind) == 2
    v = judge(spark, synth, tmp_path)
    assert all(not c for c in counts(v).values()), counts(v)


@pytest.mark.parametrize(
    "other_partition_rewind", nightly_except([None, "seek", "assign"], keep={"seek"})
)
def test_records_seen_again_without_a_rewind_point_of_their_partition_are_anomalies(
    spark: SparkSession, tmp_path: Path, other_partition_rewind: str | None
) -> None:
    synth = build(**_config())
    n = _reread(synth, other_partition_rewind, other_partition=True)
    v = judge(spark, synth, tmp_path)
    c = counts(v)
    assert c["ordering"] == {"non_monotonic": 1}, c
    assert c["duplicate"] == {"redelivered": n}, c
    assert all(not k for name, k in c.items() if name not in {"ordering", "duplicate"}), c
