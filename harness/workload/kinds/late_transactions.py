"""The transaction pairs of a ``tv2_producer`` with ``misbehavior.late_request``: KIP-890
(KIP-890)'s three late-request cases, played with our producer holding a request and
delivering it late (:class:`~..late_requests.LateRequestProducer`), recorded as any other
transaction.

What each leaves in the history where the defense is absent (TV0; TV0/1 for the last two):

* ``produce_after_abort``: transaction N aborted, and a record of N in the log after its
  abort marker, in a transaction no coordinator knows (hanging);
* ``produce_into_next``: a record of the aborted N committed with N+1 (an aborted read);
* ``end_txn_into_next``: N+1's first record committed by N's late EndTxn although the client
  aborts N+1 (an aborted read).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ....rundir.schema import Outcome, encode_value
from ..late_requests import LateRequestProducer
from ..workers import FLUSH_TIMEOUT_S

if TYPE_CHECKING:
    from .tv2_producer import Tv2ProducerWorker


def _client(w: Tv2ProducerWorker) -> LateRequestProducer:
    c = w.client
    assert isinstance(c, LateRequestProducer), "a late_request user opens a LateRequestProducer"
    return c


def _records_of(w: Tv2ProducerWorker, txn: int) -> bool:
    """Begin ``txn``'s records and wait for their acknowledgements; False: it must abort."""
    c = _client(w)
    w.send_records(txn)
    c.flush(FLUSH_TIMEOUT_S)
    return not c.txn_abortable


def _abort(w: Tv2ProducerWorker, txn: int) -> Outcome:
    _client(w).abort(txn, w.spec.op_timeout_s, w.spec.commit_retries)
    return Outcome.FAIL


def _late_value(w: Tv2ProducerWorker, txn: int) -> str:
    """A record value no ordinary send of ``txn`` uses (indices run to records_per_txn)."""
    return encode_value(w.process, txn, w.spec.records_per_txn)


def produce_after_abort(w: Tv2ProducerWorker) -> Outcome:
    """N's last Produce is held; the client gives up on it (a timeout) and aborts N; once
    the abort's markers are written, the Produce arrives."""
    c = _client(w)
    txn = w.begin()
    if not _records_of(w, txn):
        return _abort(w, txn)
    topic, partition = w.rng.choice(w.partitions())
    held = c.hold_produce(txn, topic, partition, _late_value(w, txn))
    c.timed_out(held)
    _abort(w, txn)
    c.wait_finished()
    c.release(held)
    return Outcome.FAIL


def produce_into_next(w: Tv2ProducerWorker) -> Outcome:
    """A Produce of N is held and N aborted; N+1 adds the partition (TV0/1: AddPartitionsToTxn;
    TV2 adds it on write), the held Produce arrives, then N+1 writes and commits."""
    c = _client(w)
    txn = w.begin()
    if not _records_of(w, txn):
        return _abort(w, txn)
    topic, partition = w.rng.choice(w.partitions())
    held = c.hold_produce(txn, topic, partition, _late_value(w, txn))
    _abort(w, txn)
    following = w.begin()
    if c.producer is not None and c.producer.transaction_version < 2:
        c.add_partition(topic, partition)
    c.release(held)
    if not _records_of(w, following):
        return _abort(w, following)
    return c.commit(following, w.spec.op_timeout_s, w.spec.commit_retries)


def end_txn_into_next(w: Tv2ProducerWorker) -> Outcome:
    """N's EndTxn(commit) is held (its answer lost) and N commits with a second one; N+1 writes
    a record, the held EndTxn arrives, N+1 writes a record to another partition and the client
    aborts N+1."""
    c = _client(w)
    txn = w.begin()
    if not _records_of(w, txn):
        return _abort(w, txn)
    held = c.hold_end_txn(commit=True)
    if c.commit(txn, w.spec.op_timeout_s, w.spec.commit_retries) != Outcome.OK:
        return Outcome.FAIL
    following = w.begin()
    first, second = w.rng.sample(w.partitions(), 2)
    for i, (topic, partition) in enumerate((first, second)):
        c.send(topic, partition, encode_value(w.process, following, i), txn=following)
        c.flush(FLUSH_TIMEOUT_S)
        if c.txn_abortable:
            break
        if i == 0 and c.deliver(held) == 0:
            c.wait_finished()
    return _abort(w, following)


FLOWS: dict[str, Callable[[Tv2ProducerWorker], Outcome]] = {
    "produce_after_abort": produce_after_abort,
    "produce_into_next": produce_into_next,
    "end_txn_into_next": end_txn_into_next,
}
