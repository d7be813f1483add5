"""Issue 35 item 6: ListTransactions' pattern is matched in linear time (RE2, as Kafka's
RE2/J) and a pattern RE2/J refuses gets Kafka's INVALID_REGULAR_EXPRESSION message
instead of a traceback."""

from __future__ import annotations

import pytest

from txnchaos.cluster.coordinator.transactions.id_pattern import InvalidPattern, id_matcher


def test_a_catastrophic_pattern_is_matched_in_linear_time() -> None:
    # Python's re backtracks 2^n times on (a+)+b: 16.6 s at n = 29, doubling with each a.
    matches = id_matcher("(a+)+b")
    assert not matches("a" * 60)
    assert matches("a" * 60 + "b")


def test_whole_id_matches_as_kafka() -> None:
    matches = id_matcher("tx-[0-9]+")
    assert matches("tx-12")
    assert not matches("tx-12-extra")
    assert not matches("my-tx-12")


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        ("a{99999999999}", "invalid repeat count: `{99999999999}`"),
        ("a{1,1001}", "invalid repeat count: `{1,1001}`"),
        ("(", "missing ): ("),
    ],
)
def test_a_pattern_re2j_refuses_is_invalid(pattern: str, reason: str) -> None:
    with pytest.raises(InvalidPattern) as refused:
        id_matcher(pattern)
    assert str(refused.value) == (
        f"Transaction ID pattern `{pattern}` is not a valid regular expression: {reason}."
    )
