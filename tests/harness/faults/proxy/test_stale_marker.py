"""``stale_marker``: which kept marker copies a broker must refuse once it wrote a batch of
the marker's producer (the copies the rule delivers), and the rule's validation. The copies
reaching real nodes are in tests/integration/test_stale_marker.py."""

from __future__ import annotations

from collections import deque

import pytest
from pydantic import ValidationError

from txnchaos.harness.faults.proxy import ProxyFleet
from txnchaos.harness.faults.proxy.rules import StaleMarkerRule, parse_rule
from txnchaos.harness.faults.proxy.rules.stale_marker import (
    _AWAITING_MAX,
    Copies,
    MarkerCopy,
    _awaiting,
    _remember_written,
    _stale_copies,
)

P0 = ("events", 0)
P1 = ("events", 1)


def _copy(
    epoch: int,
    tv: int,
    coordinator: int = 0,
    partition: tuple[str, int] = P0,
    source: tuple[int, int] | None = None,
) -> MarkerCopy:
    return MarkerCopy(
        producer_id=7,
        producer_epoch=epoch,
        coordinator_epoch=coordinator,
        transaction_version=tv,
        commit=True,
        partition=partition,
        upstream=("127.0.0.1", 1),
        request=None,
        api_version=1,
        client_id=None,
        source=source,
    )


def _state(*copies: MarkerCopy, written: int | None = None) -> Copies:
    c = Copies()
    c.kept[("n1", 7)] = deque(copies)
    if written is not None:
        c.written[("n1", P0, 7)] = written
    return c


def test_a_tv2_marker_at_the_open_transactions_epoch_is_stale() -> None:
    c = _state(_copy(5, 2), _copy(6, 2))
    out = _stale_copies(c, "n1", P0, 7, 6)
    assert [(copy.producer_epoch, why.split()[0]) for copy, why in out] == [
        (5, "producer"),
        (6, "TV2"),
    ]
    assert not c.kept[("n1", 7)]  # each copy goes once


def test_a_tv0_marker_at_the_same_epoch_waits_for_a_newer_coordinator_epoch() -> None:
    """At TV0 a producer keeps its epoch: a correct broker writes a same-epoch marker unless
    it wrote one of a newer coordinator epoch for that producer there."""
    same = _copy(3, 0, coordinator=4)
    c = _state(same)
    assert _stale_copies(c, "n1", P0, 7, 3) == []
    c.written[("n1", P0, 7)] = 4  # the same coordinator incarnation
    assert _stale_copies(c, "n1", P0, 7, 3) == []
    c.written[("n1", P0, 7)] = 5  # the coordinator restarted and wrote a marker since
    ((copy, why),) = _stale_copies(c, "n1", P0, 7, 3)
    assert copy is same and why.startswith("coordinator epoch 4 is older than the 5")


def test_a_marker_of_an_older_coordinator_incarnation_is_stale_at_the_same_epochs() -> None:
    """A coordinator node restarted (its incarnation 0 -> 1) without bumping its coordinator
    epoch: nothing but the incarnation tells its old marker from the new one's, and once
    the broker wrote one of the new incarnation the old one's copy goes."""
    old = _copy(3, 0, coordinator=4, source=(1001, 0))
    other = _copy(3, 0, coordinator=4, source=(1002, 0))  # another node's: unchanged
    c = _state(old, other)
    fresh = _copy(3, 0, coordinator=4, source=(1001, 0))
    _remember_written(c, "n1", [fresh], {(7, P0): 0})  # the same incarnation
    assert _stale_copies(c, "n1", P0, 7, 3) == []
    refused = _copy(3, 0, coordinator=4, source=(1001, 1))
    _remember_written(c, "n1", [refused], {(7, P0): 47})  # the broker did not write it
    assert _stale_copies(c, "n1", P0, 7, 3) == []
    new = _copy(3, 0, coordinator=4, source=(1001, 1))
    _remember_written(c, "n1", [new], {(7, P0): 0})
    assert c.written_by == {("n1", P0, 7, 1001): 1}
    assert _stale_copies(c, "n2", P0, 7, 3) == []  # another broker wrote nothing of it
    ((copy, why),) = _stale_copies(c, "n1", P0, 7, 3)
    assert copy is old
    assert why == (
        "older coordinator incarnation: n1001 incarnation 0, a marker of incarnation 1 written "
        "since"
    )
    assert copy.describe()["source"] == {"node": 1001, "incarnation": 0}
    assert list(c.kept[("n1", 7)]) == [other]


def test_the_incarnation_names_an_old_copy_before_its_coordinator_epoch_does() -> None:
    """On a correct cluster an old incarnation's copy is also of an older coordinator epoch:
    it is logged as the incarnation's, which a correct broker must refuse as well."""
    c = _state(_copy(3, 1, coordinator=4, source=(1001, 0)))
    _remember_written(c, "n1", [_copy(3, 1, coordinator=5, source=(1001, 1))], {(7, P0): 0})
    ((_, why),) = _stale_copies(c, "n1", P0, 7, 3)
    assert why.startswith("older coordinator incarnation: n1001 incarnation 0")


def test_the_fleet_numbers_a_nodes_incarnations_for_its_links() -> None:
    fleet = ProxyFleet()
    assert fleet.source_incarnation("n1001->n1") == (1001, 0)
    assert fleet.new_incarnation(1001) == 1
    assert fleet.new_incarnation(1001) == 2
    assert fleet.source_incarnation("n1001->n1") == (1001, 2)
    assert fleet.source_incarnation("n1->n2.controller") == (1, 0)
    assert fleet.source_incarnation("client->n1") is None
    assert fleet.source_incarnation("client->bootstrap0") is None


def test_an_older_incarnations_marker_of_a_newer_producer_epoch_waits() -> None:
    c = _state(_copy(4, 0, source=(1001, 0)))
    _remember_written(c, "n1", [_copy(4, 0, source=(1001, 1))], {(7, P0): 0})
    assert _stale_copies(c, "n1", P0, 7, 3) == []


def test_an_older_producer_epoch_is_stale_at_any_version() -> None:
    c = _state(_copy(2, 0), _copy(2, 1), _copy(3, 0))
    out = _stale_copies(c, "n1", P0, 7, 3)
    assert [(x.producer_epoch, x.transaction_version) for x, _ in out] == [(2, 0), (2, 1)]


def test_only_the_written_partition_broker_and_producer_bring_a_copy() -> None:
    c = _state(_copy(5, 2, partition=P1))
    assert _stale_copies(c, "n1", P0, 7, 6) == []  # another partition
    assert _stale_copies(c, "n2", P1, 7, 6) == []  # another broker
    assert _stale_copies(c, "n1", P1, 8, 6) == []  # another producer
    assert len(_stale_copies(c, "n1", P1, 7, 6)) == 1


def test_a_newer_marker_than_the_write_is_never_delivered() -> None:
    c = _state(_copy(7, 2), _copy(7, 0, coordinator=0), written=3)
    assert _stale_copies(c, "n1", P0, 7, 6) == []


def test_the_rule_reads_markers_and_writes_both_ways_on_every_one() -> None:
    rule = StaleMarkerRule()
    assert sorted(rule.api or []) == [0, 27] and rule.direction == "both"
    parse_rule({"kind": "stale_marker", "api": ["Produce", "WriteTxnMarkers"], "link": "*"})
    with pytest.raises(ValidationError, match="api must be those two"):
        parse_rule({"kind": "stale_marker", "api": ["WriteTxnMarkers"]})
    with pytest.raises(ValidationError, match="direction both"):
        parse_rule({"kind": "stale_marker", "direction": "request"})
    with pytest.raises(ValidationError, match="no nth, probability"):
        parse_rule({"kind": "stale_marker", "probability": 0.5})


def test_requests_whose_answer_never_comes_are_forgotten_oldest_first() -> None:
    table: dict[tuple[int, int], int] = {}
    for corr in range(_AWAITING_MAX + 5):
        _awaiting(table)[(1, corr)] = corr
    assert len(table) == _AWAITING_MAX
    assert min(table.values()) == 5
