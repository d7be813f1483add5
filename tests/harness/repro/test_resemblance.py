"""An invalid run's report names the catalogue entry it resembles: the one whose bug
configuration its cluster ran with, else those whose predicted checkers all flagged it."""

from __future__ import annotations

from txnchaos.analysis.report.page import summary_paragraph
from txnchaos.analysis.verdict import INVALID, VALID, CheckerVerdict, Verdict, resemblance
from txnchaos.harness.repro.catalogue import SHIPPED
from txnchaos.harness.repro.resemblance import resembling, sentences


def checker(name: str, n: int) -> CheckerVerdict:
    return CheckerVerdict(name, INVALID if n else VALID, "", {name: n}, n)


def verdict(flagged: dict[str, int], settings: list[str]) -> Verdict:
    """A verdict as written: what the catalogue says it resembles filled in (write_verdict)."""
    v = Verdict(
        run_dir="r",
        status=INVALID if any(flagged.values()) else VALID,
        checkers={name: checker(name, n) for name, n in flagged.items()},
        stats={"ops": 10},
        run={"cluster": {"spec": {"settings": settings}}},
    )
    v.resembles = resemblance(v, sentences)
    return v


def test_the_switched_on_entry_comes_first() -> None:
    found = resembling({"aborted_read"}, ["txnchaos.bug.lso.ignores.open.transactions=true"])
    assert [(r.entry.name, r.switched_on) for r in found] == [
        ("lso-ignores-open-transactions", True)
    ]
    weak = resembling({"aborted_read", "lost_write"}, [], SHIPPED, limit=10)
    assert {r.entry.name for r in weak} == {
        "end-txn-into-next-transaction",
        "fetch-ignores-aborted-index",
        "lso-ignores-open-transactions",
        "produce-into-next-transaction",
    }
    assert len(resembling({"aborted_read"}, [], SHIPPED)) == 2  # the first two, by default
    assert not any(r.switched_on for r in weak)
    assert resembling({"ordering"}, []) == []
    assert resembling(set(), []) == []


def test_the_report_says_it_in_words() -> None:
    v = verdict(
        {"hanging_transactions": 2, "aborted_read": 0},
        ["txnchaos.bug.producer.expiry.ignores.open.transactions=true"],
    )
    text = summary_paragraph(v, [], 0)
    assert "It resembles the catalogue entry producer-state-expiry (KAFKA-9144)" in text
    assert "`txnchaos repro producer-state-expiry`" in text
    assert "resembles" not in summary_paragraph(verdict({"aborted_read": 0}, []), [], 0)
