"""Helpers shared by the group-coordinator unit tests (no tests here).

The coordinator is driven through its real request handlers with kio request
objects, a fake clock and ``tick()`` instead of the background timer task, so
nothing depends on wall-clock timing.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from txnchaos.cluster.coordinator.groups import GroupApis, GroupConfig, GroupCoordinator
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext

T = TypeVar("T")

JOIN, SYNC, HEARTBEAT, LEAVE = 11, 14, 12, 13
OFFSET_COMMIT, OFFSET_FETCH = 8, 9
DESCRIBE, LIST, DELETE = 15, 16, 42

TOPICS = {"t1": 3, "t2": 1}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance_ms(self, ms: float) -> None:
        self.now += ms / 1000


def async_test(fn: Callable[..., Awaitable[T]]) -> Callable[..., T]:
    """Run an async test body on a fresh event loop (bounded, generously)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> T:
        return asyncio.run(asyncio.wait_for(fn(*args, **kwargs), 20))

    return wrapper


async def settle() -> None:
    """Let every runnable task run until it blocks again (no real I/O is involved)."""
    for _ in range(20):
        await asyncio.sleep(0)


class Harness:
    """A coordinator with its handlers registered on a real ApiRegistry."""

    def __init__(self, data_dir: Path, clock: FakeClock | None = None, **config: Any) -> None:
        self.data_dir = data_dir
        self.clock = clock or FakeClock()
        config.setdefault("initial_rebalance_delay_ms", 0)
        config.setdefault("timer_tick_ms", 0)
        self.config = GroupConfig(**config)
        self.coordinator = GroupCoordinator(
            data_dir,
            num_partitions=5,
            topic_partition_count=TOPICS.get,
            clock=self.clock,
            config=self.config,
        )
        self.registry = ApiRegistry()
        self.coordinator.register(self.registry)
        self.apis = GroupApis(self.coordinator)

    async def start(self) -> Harness:
        await self.coordinator.start()
        return self

    async def restart(self) -> Harness:
        await self.coordinator.stop()
        other = Harness(self.data_dir, self.clock, **_config_kwargs(self.config))
        return await other.start()

    async def call(
        self, api_key: int, version: int, data: dict[str, Any], client: str = "c"
    ) -> Any:
        spec = self.registry.get(api_key)
        assert spec is not None and spec.min_version <= version <= spec.max_version
        ctx = RequestContext(api_key, version, 1, client, "127.0.0.1:40000", 1)
        request = make(request_class(api_key, version), data)
        return await spec.handler(ctx, request)

    def spawn(
        self, api_key: int, version: int, data: dict[str, Any], client: str = "c"
    ) -> asyncio.Task[Any]:
        return asyncio.ensure_future(self.call(api_key, version, data, client))

    def tick_after(self, ms: float) -> None:
        self.clock.advance_ms(ms)
        self.coordinator.tick()

    # -- request shorthands ---------------------------------------------------------------

    @staticmethod
    def join_data(
        member_id: str = "",
        *,
        group: str = "g",
        protocols: list[tuple[str, bytes]] | None = None,
        session_ms: int = 10_000,
        rebalance_ms: int = 20_000,
        instance_id: str | None = None,
        protocol_type: str = "consumer",
    ) -> dict[str, Any]:
        protocols = protocols or [("range", b"meta-" + member_id.encode())]
        return {
            "group_id": group,
            "session_timeout": session_ms,
            "rebalance_timeout": rebalance_ms,
            "member_id": member_id,
            "group_instance_id": instance_id,
            "protocol_type": protocol_type,
            "protocols": [{"name": n, "metadata": m} for n, m in protocols],
        }

    async def join(self, member_id: str = "", version: int = 5, **kw: Any) -> Any:
        return await self.call(JOIN, version, self.join_data(member_id, **kw))

    def start_join(self, member_id: str = "", version: int = 5, **kw: Any) -> asyncio.Task[Any]:
        return self.spawn(JOIN, version, self.join_data(member_id, **kw))

    async def new_member_id(self, group: str = "g", **kw: Any) -> str:
        """Run the JoinGroup v4+ MEMBER_ID_REQUIRED step and return the issued id."""
        resp = await self.join("", group=group, **kw)
        assert resp.error_code == 79, resp
        return resp.member_id

    def sync_data(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance_id: str | None = None,
    ) -> dict[str, Any]:
        return {
            "group_id": group,
            "generation_id": generation,
            "member_id": member_id,
            "group_instance_id": instance_id,
            "protocol_type": "consumer",
            "protocol_name": None,
            "assignments": [
                {"member_id": m, "assignment": a} for m, a in (assignments or {}).items()
            ],
        }

    async def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        version: int = 3,
        **kw: Any,
    ) -> Any:
        return await self.call(
            SYNC, version, self.sync_data(member_id, generation, assignments, **kw)
        )

    def start_sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        version: int = 3,
        **kw: Any,
    ) -> asyncio.Task[Any]:
        return self.spawn(SYNC, version, self.sync_data(member_id, generation, assignments, **kw))

    async def heartbeat(
        self,
        member_id: str,
        generation: int,
        *,
        group: str = "g",
        instance_id: str | None = None,
        version: int = 3,
    ) -> int:
        resp = await self.call(
            HEARTBEAT,
            version,
            {
                "group_id": group,
                "generation_id": generation,
                "member_id": member_id,
                "group_instance_id": instance_id,
            },
        )
        return int(resp.error_code)

    async def leave(self, member_id: str, *, group: str = "g", version: int = 1) -> int:
        resp = await self.call(LEAVE, version, {"group_id": group, "member_id": member_id})
        return int(resp.error_code)

    async def commit(
        self,
        offsets: dict[tuple[str, int], int],
        *,
        group: str = "g",
        generation: int = -1,
        member_id: str = "",
        metadata: str | None = "",
        version: int = 9,
    ) -> dict[tuple[str, int], int]:
        topics: dict[str, list[dict[str, Any]]] = {}
        for (topic, partition), offset in offsets.items():
            topics.setdefault(topic, []).append(
                {
                    "partition_index": partition,
                    "committed_offset": offset,
                    "committed_leader_epoch": 4,
                    "committed_metadata": metadata,
                }
            )
        resp = await self.call(
            OFFSET_COMMIT,
            version,
            {
                "group_id": group,
                "generation_id_or_member_epoch": generation,
                "member_id": member_id,
                "topics": [{"name": t, "partitions": ps} for t, ps in topics.items()],
            },
        )
        return {
            (t.name, p.partition_index): int(p.error_code)
            for t in resp.topics
            for p in t.partitions
        }

    async def fetch(
        self,
        partitions: dict[str, list[int]] | None,
        *,
        group: str = "g",
        require_stable: bool = False,
        version: int = 7,
    ) -> tuple[int, dict[tuple[str, int], tuple[int, int]]]:
        """(group error, (topic, partition) -> (offset, error)) via OffsetFetch v<8."""
        topics = (
            None
            if partitions is None
            else [{"name": t, "partition_indexes": ps} for t, ps in partitions.items()]
        )
        resp = await self.call(
            OFFSET_FETCH,
            version,
            {"group_id": group, "topics": topics, "require_stable": require_stable},
        )
        result = {
            (t.name, p.partition_index): (p.committed_offset, int(p.error_code))
            for t in resp.topics
            for p in t.partitions
        }
        return int(getattr(resp, "error_code", 0)), result


def _config_kwargs(config: GroupConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


async def form_group(h: Harness, n: int, *, group: str = "g", **join: Any) -> tuple[list[str], int]:
    """n members through MEMBER_ID_REQUIRED, join and sync; returns (member ids, generation)."""
    ids = [await h.new_member_id(group=group, **join) for _ in range(n)]
    tasks = [h.start_join(mid, group=group, **join) for mid in ids]
    await settle()
    responses = [await t for t in tasks]
    generation = responses[0].generation_id
    leader = responses[0].leader
    assert all(r.error_code == 0 and r.generation_id == generation for r in responses)
    assignments = {mid: f"assign-{mid}".encode() for mid in ids}
    syncs = [
        h.start_sync(mid, generation, assignments if mid == leader else None, group=group)
        for mid in ids
    ]
    await settle()
    for mid, task in zip(ids, syncs, strict=True):
        resp = await task
        assert resp.error_code == 0 and resp.assignment == assignments[mid]
    return ids, generation
