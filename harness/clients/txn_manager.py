"""The producer's requests to coordinators, each retried and classified.

InitProducerId, AddPartitionsToTxn, AddOffsetsToTxn and EndTxn go to the transaction
coordinator; TxnOffsetCommit to the group coordinator. Versions: the highest both sides
speak, capped where the transaction version says so (TV0/1: EndTxn <= 4, TxnOffsetCommit
<= 4; TV2: EndTxn 5, whose response carries the bumped epoch, and TxnOffsetCommit 5, which
adds the offsets partition implicitly). A coordinator error or a lost connection sends the
request again (to a freshly found coordinator where needed) until the deadline; what is
left is raised as the class ``errors.py`` gives it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from .config import ProducerConfig
from .connection import (
    API_ADD_OFFSETS,
    API_ADD_PARTITIONS,
    API_END_TXN,
    API_INIT_PRODUCER_ID,
    API_TXN_OFFSET_COMMIT,
    ConnectionLost,
    NodeConnection,
)
from .errors import (
    ADD_OFFSETS,
    ADD_PARTITIONS,
    END_TXN,
    INIT_PRODUCER_ID,
    OPERATION_NOT_ATTEMPTED,
    TXN_OFFSET_COMMIT,
    Action,
    RetriableError,
    UnsupportedError,
    action,
    exception_for,
)
from .group import GroupMetadata
from .metadata import KEY_GROUP, KEY_TRANSACTION, ClusterView
from .producer_state import ProducerState


class InitAnswer(NamedTuple):
    """InitProducerId's answer: the id and epoch to use, and (v6, keep-prepared) the id
    and epoch of the transaction the coordinator kept open (-1 if none)."""

    producer_id: int
    epoch: int
    ongoing_producer_id: int = -1
    ongoing_epoch: int = -1


_PRECEDENCE = {
    Action.FATAL: 0,
    Action.COORDINATOR: 1,
    Action.RETRY: 2,
    Action.BUMP: 3,
    Action.ABORTABLE: 4,
}


def _first_error(codes: Iterable[int], table: dict[int, Action]) -> int:
    """The error that decides a multi-partition answer: fatal, then one that retries the
    whole request, then abortable ones; OPERATION_NOT_ATTEMPTED (the partitions left
    undone because of another's error) only when alone."""
    found = [c for c in codes if c != 0]
    if not found:
        return 0
    real = [c for c in found if c != OPERATION_NOT_ATTEMPTED] or found
    return min(real, key=lambda c: _PRECEDENCE.get(action(table, c), 5))


class TxnRequests:
    def __init__(self, view: ClusterView, state: ProducerState, config: ProducerConfig) -> None:
        self.view = view
        self.state = state
        self.config = config
        self.txn_id = config.transactional_id
        self.timeout_s = config.request_timeout_ms / 1000
        self.backoff_s = config.retry_backoff_ms / 1000

    async def coordinator(self) -> NodeConnection:
        if self.txn_id is None:
            return await self.view.any_connection()
        conn = await self.view.coordinator(KEY_TRANSACTION, self.txn_id)
        await conn.negotiate(self.timeout_s)
        return conn

    async def _call(
        self,
        name: str,
        find: Callable[[], Any],
        forget: Callable[[], None],
        build: Callable[[NodeConnection], Any],
        table: dict[int, Action],
        error_of: Callable[[Any], int],
        deadline: float,
    ) -> Any:
        """Send ``build(conn)`` to ``find()`` until it succeeds, fails for good or the
        deadline passes (RetriableError)."""
        last = "no attempt"
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RetriableError(f"{name} did not complete in time (last: {last})")
            try:
                conn = await find()
                response = await conn.send_entity(build(conn), min(self.timeout_s, remaining))
            except ConnectionLost as exc:
                forget()
                last = str(exc)
                await asyncio.sleep(self.backoff_s)
                continue
            except UnsupportedError:
                raise
            except RetriableError as exc:
                last = str(exc)
                await asyncio.sleep(self.backoff_s)
                continue
            code = error_of(response)
            act = action(table, code)
            if act is Action.OK:
                return response
            last = f"error {code}"
            if act is Action.COORDINATOR:
                forget()
            elif act is not Action.RETRY:
                raise exception_for(act, name, code)
            await asyncio.sleep(self.backoff_s)

    def _txn_call(
        self,
        name: str,
        api_key: int,
        body: Callable[[NodeConnection], tuple[dict[str, Any], int | None]],
        table: dict[int, Action],
        error_of: Callable[[Any], int],
        deadline: float,
    ) -> Any:
        def build(conn: NodeConnection) -> Any:
            fields, cap = body(conn)
            return conn.build(api_key, fields, cap=cap)

        def forget() -> None:
            if self.txn_id is not None:
                self.view.forget_coordinator(KEY_TRANSACTION, self.txn_id)

        return self._call(name, self.coordinator, forget, build, table, error_of, deadline)

    # -- InitProducerId -----------------------------------------------------------------------

    async def init_producer_id(
        self,
        deadline: float,
        *,
        bump: bool,
        keep_prepared_txn: bool = False,
        expected: tuple[int, int] | None = None,
    ) -> InitAnswer:
        """A producer id and epoch. ``bump`` (KIP-360) sends the current ones (v3+), which the
        coordinator accepts only if they are still current: a fenced producer gets
        INVALID_PRODUCER_EPOCH (fatal). ``expected`` (with ``bump``): send this producer id
        and epoch instead of the current ones (a call pipelined behind others, naming the
        epoch they will have left). KIP-939 (v6): Enable2Pc from the config, and
        ``keep_prepared_txn`` asks the coordinator to keep an open transaction (the answer
        then names it)."""
        current = self.state.current
        expected_id, expected_epoch = (
            (current.producer_id, current.epoch) if expected is None else expected
        )
        two_pc = self.config.enable_two_phase_commit

        def body(conn: NodeConnection) -> tuple[dict[str, Any], int | None]:
            fields: dict[str, Any] = {
                "transactional_id": self.txn_id,
                "transaction_timeout": self.config.transaction_timeout,
                "producer_id": -1,
                "producer_epoch": -1,
            }
            if bump:
                if conn.version(API_INIT_PRODUCER_ID) < 3:
                    raise UnsupportedError("InitProducerId < v3 cannot bump an epoch")
                fields["producer_id"] = expected_id
                fields["producer_epoch"] = expected_epoch
            if two_pc or keep_prepared_txn:
                if conn.version(API_INIT_PRODUCER_ID) < 6:
                    raise UnsupportedError(
                        "two-phase commit (KIP-939) needs InitProducerId v6; the coordinator "
                        "does not serve it"
                    )
                fields["enable2_pc"] = two_pc
                fields["keep_prepared_txn"] = keep_prepared_txn
            return fields, None

        response = await self._txn_call(
            "InitProducerId",
            API_INIT_PRODUCER_ID,
            body,
            INIT_PRODUCER_ID,
            lambda r: int(r.error_code),
            deadline,
        )
        return InitAnswer(
            int(response.producer_id),
            int(response.producer_epoch),
            int(getattr(response, "ongoing_txn_producer_id", -1)),
            int(getattr(response, "ongoing_txn_producer_epoch", -1)),
        )

    async def can_bump(self) -> bool:
        conn = await self.coordinator()
        return conn.versions.get(API_INIT_PRODUCER_ID, (0, 0))[1] >= 3

    # -- AddPartitionsToTxn (TV0/1) -----------------------------------------------------------

    async def add_partitions(self, partitions: set[tuple[str, int]], deadline: float) -> None:
        ids = self.state.current
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(partitions):
            by_topic.setdefault(topic, []).append(p)

        def body(conn: NodeConnection) -> tuple[dict[str, Any], int | None]:
            return {
                "v3_and_below_transactional_id": self.txn_id,
                "v3_and_below_producer_id": ids.producer_id,
                "v3_and_below_producer_epoch": ids.epoch,
                "v3_and_below_topics": [
                    {"name": t, "partitions": ps} for t, ps in by_topic.items()
                ],
            }, 3

        def error_of(r: Any) -> int:
            return _first_error(
                (
                    int(p.partition_error_code)
                    for t in r.results_by_topic_v3_and_below
                    for p in t.results_by_partition
                ),
                ADD_PARTITIONS,
            )

        await self._txn_call(
            "AddPartitionsToTxn", API_ADD_PARTITIONS, body, ADD_PARTITIONS, error_of, deadline
        )

    # -- offsets ------------------------------------------------------------------------------

    async def add_offsets(self, group_id: str, deadline: float) -> None:
        ids = self.state.current

        def body(conn: NodeConnection) -> tuple[dict[str, Any], int | None]:
            return {
                "transactional_id": self.txn_id,
                "producer_id": ids.producer_id,
                "producer_epoch": ids.epoch,
                "group_id": group_id,
            }, None

        await self._txn_call(
            "AddOffsetsToTxn",
            API_ADD_OFFSETS,
            body,
            ADD_OFFSETS,
            lambda r: int(r.error_code),
            deadline,
        )

    async def txn_offset_commit(
        self,
        group: GroupMetadata,
        offsets: list[tuple[str, int, int]],
        tv: int,
        deadline: float,
    ) -> None:
        ids = self.state.current
        by_topic: dict[str, list[dict[str, Any]]] = {}
        for topic, p, offset in offsets:
            by_topic.setdefault(topic, []).append(
                {
                    "partition_index": p,
                    "committed_offset": offset,
                    "committed_leader_epoch": -1,
                    "committed_metadata": "",
                }
            )
        cap = 5 if tv >= 2 else 4

        def build(conn: NodeConnection) -> Any:
            return conn.build(
                API_TXN_OFFSET_COMMIT,
                {
                    "transactional_id": self.txn_id,
                    "group_id": group.group_id,
                    "producer_id": ids.producer_id,
                    "producer_epoch": ids.epoch,
                    "generation_id": group.generation_id,
                    "member_id": group.member_id,
                    "group_instance_id": group.group_instance_id,
                    "topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()],
                },
                cap=cap,
            )

        async def find() -> NodeConnection:
            conn = await self.view.coordinator(KEY_GROUP, group.group_id)
            await conn.negotiate(self.timeout_s)
            if tv >= 2 and conn.version(API_TXN_OFFSET_COMMIT, cap) < 5:
                raise UnsupportedError("transaction.version 2 needs TxnOffsetCommit v5")
            return conn

        def error_of(r: Any) -> int:
            codes = (int(p.error_code) for t in r.topics for p in t.partitions)
            return _first_error(codes, TXN_OFFSET_COMMIT)

        await self._call(
            "TxnOffsetCommit",
            find,
            lambda: self.view.forget_coordinator(KEY_GROUP, group.group_id),
            build,
            TXN_OFFSET_COMMIT,
            error_of,
            deadline,
        )

    # -- EndTxn -------------------------------------------------------------------------------

    def end_txn_request(self, conn: NodeConnection, commit: bool, tv: int) -> Any:
        """The EndTxn entity for the current producer id and epoch (v5 under TV2)."""
        ids = self.state.current
        cap = 5 if tv >= 2 else 4
        version = conn.version(API_END_TXN, cap)
        if tv >= 2 and version < 5:
            raise UnsupportedError("transaction.version 2 needs EndTxn v5")
        return conn.build(
            API_END_TXN,
            {
                "transactional_id": self.txn_id,
                "producer_id": ids.producer_id,
                "producer_epoch": ids.epoch,
                "committed": commit,
            },
            version=version,
        )

    async def end_txn(self, commit: bool, tv: int, deadline: float) -> tuple[int, int] | None:
        """Commit or abort; under TV2 returns the producer id and (bumped) epoch to use next."""

        def forget() -> None:
            if self.txn_id is not None:
                self.view.forget_coordinator(KEY_TRANSACTION, self.txn_id)

        response = await self._call(
            "EndTxn",
            self.coordinator,
            forget,
            lambda conn: self.end_txn_request(conn, commit, tv),
            END_TXN,
            lambda r: int(r.error_code),
            deadline,
        )
        if tv >= 2 and hasattr(response, "producer_epoch"):
            return int(response.producer_id), int(response.producer_epoch)
        return None
