"""KIP-360 on our idempotent producer: after an error that asks for an epoch bump it bumps
its own epoch once nothing is in flight, and at the last epoch takes a new producer id
(InitProducerId), as Kafka's Java client does (``bumpIdempotentProducerEpoch``)."""

from __future__ import annotations

import asyncio

from txnchaos.harness.clients import Producer, ProducerConfig
from txnchaos.harness.clients.producer_state import MAX_EPOCH, ProducerIdAndEpoch
from txnchaos.harness.clients.txn_manager import InitAnswer


def bumped(epoch: int) -> tuple[ProducerIdAndEpoch, int]:
    """(the ids after a sender pass with a bump pending at ``epoch``, InitProducerId calls)."""
    p = Producer(ProducerConfig("127.0.0.1:1"))
    calls: list[bool] = []

    async def init_producer_id(deadline: float, *, bump: bool, **_: object) -> InitAnswer:
        calls.append(bump)
        return InitAnswer(8, 0)

    p.txn.init_producer_id = init_producer_id  # type: ignore[method-assign]
    p.state.set_id(7, epoch)
    p.state.take_sequence("t", 0, 5)
    p.sender.idempotent_bump = True
    asyncio.run(p.sender._pass())
    assert not p.sender.idempotent_bump
    assert p.state.next_sequence("t", 0) == 0  # a new epoch (or id) starts at 0
    return p.state.current, len(calls)


def test_bump_below_the_last_epoch_is_local() -> None:
    assert bumped(5) == (ProducerIdAndEpoch(7, 6), 0)
    assert bumped(MAX_EPOCH - 1) == (ProducerIdAndEpoch(7, MAX_EPOCH), 0)


def test_bump_at_the_last_epoch_takes_a_new_producer_id() -> None:
    assert bumped(MAX_EPOCH) == (ProducerIdAndEpoch(8, 0), 1)
