"""Tiny hand-written histories for the reference checkers' tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from txnchaos.analysis.model.history import write_history
from txnchaos.analysis.reference import Item, Op, RunFacts, judge
from txnchaos.rundir.run_dir import write_run_info
from txnchaos.rundir.schema import EventType, Outcome

E, OC = EventType, Outcome


class H:
    """A history under construction: ops get the next op id of their process and times one
    millisecond apart."""

    def __init__(self) -> None:
        self.ops: list[Op] = []
        self.t = 1_000_000_000
        self.next_id: dict[str, int] = {}

    def op(self, process: str, type: EventType, *items: Item, **fields: Any) -> Op:
        self.t += 1_000_000
        op_id = self.next_id.get(process, 0)
        self.next_id[process] = op_id + 1
        fields.setdefault("outcome", OC.OK)
        fields.setdefault("complete_ns", self.t + 500_000)
        op = Op(process, op_id, type, self.t, items=items, **fields)
        self.ops.append(op)
        return op

    def txn(
        self,
        writer: str,
        txn: int,
        *places: tuple[str, int, int],
        end: EventType = E.COMMIT,
        outcome: Outcome = OC.OK,
    ) -> list[str]:
        """A transaction writing ``writer|txn|i`` at each place, then ``end`` with ``outcome``."""
        values = [f"{writer}|{txn}|{i}" for i in range(len(places))]
        self.op(writer, E.BEGIN, txn=txn)
        for v, (topic, part, off) in zip(values, places, strict=True):
            self.op(writer, E.SEND, Item(topic, part, off, v), txn=txn)
        self.op(writer, end, txn=txn, outcome=outcome)
        return values

    def read(self, consumer: str, *records: tuple[str, int, int, str], final: bool = False) -> Op:
        items = [Item(t, p, o, v) for t, p, o, v in records]
        return self.op(consumer, E.FINAL_READ if final else E.POLL, *items)

    def counts(self, facts: RunFacts | None = None) -> dict[str, dict[str, int]]:
        return {
            n: {k: c for k, c in j.counts.items() if c} for n, j in judge(self.ops, facts).items()
        }

    def write(self, run_dir: Path) -> Path:
        """As a run directory (history.parquet and run.json only)."""
        write_run_info(run_dir, scenario="hand-written", seed=0, complete=True)
        write_history(self.ops, run_dir / "history.parquet")
        return run_dir


def torn_with_unparsed_value() -> H:
    """Transaction w/0 writes ``w|0|0``, ``plain-a`` (a value not naming its transaction) and
    ``w|0|2`` at offsets 0-2; w/1 writes offsets 3-4.  A reader returns 0, 1, 2 and 4: it
    skipped 3, so w/1 is torn; w/0 it returned whole."""
    h = H()
    h.op("w", E.BEGIN, txn=0)
    for off, value in enumerate(("w|0|0", "plain-a", "w|0|2")):
        h.op("w", E.SEND, Item("t", 0, off, value), txn=0)
    h.op("w", E.COMMIT, txn=0)
    h.txn("w", 1, ("t", 0, 3), ("t", 0, 4))
    h.read("c", ("t", 0, 0, "w|0|0"), ("t", 0, 1, "plain-a"), ("t", 0, 2, "w|0|2"))
    h.read("c", ("t", 0, 4, "w|1|1"))
    return h
