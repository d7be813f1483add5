"""KIP-939's PreparedTxnState: the producer id and epoch that name a prepared transaction.

An application stores ``str(state)`` in its database in the same database transaction as
its own writes; after a crash it reads it back (``PreparedTxnState.from_string``) and hands
it to ``Producer.complete_transaction``, which commits the Kafka transaction if it is the
one the coordinator still holds open and aborts it otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

_NO_ID = -1
_MAX_EPOCH = 32767


@dataclass(frozen=True)
class PreparedTxnState:
    producer_id: int = _NO_ID
    epoch: int = _NO_ID

    def __post_init__(self) -> None:
        empty = self.producer_id == _NO_ID and self.epoch == _NO_ID
        if not empty and (self.producer_id < 0 or not 0 <= self.epoch <= _MAX_EPOCH):
            raise ValueError(
                f"not a prepared transaction state: producer id {self.producer_id}, "
                f"epoch {self.epoch} (both -1, or a producer id >= 0 and an epoch "
                f"0..{_MAX_EPOCH})"
            )

    @property
    def is_empty(self) -> bool:
        """No transaction (what a keep-prepared init reports when none is open)."""
        return self.producer_id == _NO_ID and self.epoch == _NO_ID

    def __str__(self) -> str:
        return "" if self.is_empty else f"{self.producer_id}:{self.epoch}"

    @classmethod
    def from_string(cls, text: str) -> PreparedTxnState:
        """Parse ``str(state)`` back ("" is the empty state)."""
        if not isinstance(text, str):
            raise ValueError(f"a prepared transaction state is a string, not {type(text).__name__}")
        stripped = text.strip()
        if not stripped:
            return cls()
        pid_text, sep, epoch_text = stripped.partition(":")
        try:
            if not sep or not pid_text.isdigit() or not epoch_text.isdigit():
                raise ValueError
            return cls(int(pid_text), int(epoch_text))
        except ValueError:
            raise ValueError(
                f"not a prepared transaction state: {text!r} "
                "(expected '<producer_id>:<epoch>' or '')"
            ) from None


__all__ = ["PreparedTxnState"]
