"""The partitions this broker holds: opening (with recovery), creation and deletion
as the cluster view changes, retention, and wake-ups for long-polling fetches."""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

from ..bugs import BugSwitches
from ..controller.topic_config import usable_overrides
from ..metadata import ClusterView
from ..metadata_source import MetadataSource
from ..settings import NodeSettings
from ..storage import LogConfig
from ..storage.log_dir import LogDir
from .partition import Partition

log = logging.getLogger(__name__)

TopicPartition = tuple[str, int]


def log_config_for(
    overrides: dict[str, str], settings: NodeSettings, topic: str = "?"
) -> LogConfig:
    """The log config of a topic's partitions: its stored overrides that are valid (see
    ``usable_overrides``: a bad stored value never stops a node), else the broker's."""
    usable = usable_overrides(topic, overrides)

    def pick(topic_key: str, broker_key: str) -> int:
        return int(usable.get(topic_key, settings.get(broker_key)))

    return LogConfig(
        segment_bytes=pick("segment.bytes", "log.segment.bytes"),
        segment_ms=pick("segment.ms", "log.roll.ms"),
        index_interval_bytes=pick("index.interval.bytes", "log.index.interval.bytes"),
        retention_ms=pick("retention.ms", "log.retention.ms"),
        retention_bytes=pick("retention.bytes", "log.retention.bytes"),
        max_message_bytes=pick("max.message.bytes", "message.max.bytes"),
        timestamp_before_max_ms=pick(
            "message.timestamp.before.max.ms", "log.message.timestamp.before.max.ms"
        ),
        timestamp_after_max_ms=pick(
            "message.timestamp.after.max.ms", "log.message.timestamp.after.max.ms"
        ),
    )


def _read_topic_id(directory: Path) -> uuid.UUID | None:
    meta = directory / "partition.metadata"
    if not meta.exists():
        return None
    for line in meta.read_text().splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "topic_id":
            try:
                return uuid.UUID(value.strip())
            except ValueError:
                return None
    return None


class PartitionManager:
    def __init__(
        self, data_dir: Path, node_id: int, source: MetadataSource, settings: NodeSettings
    ) -> None:
        self.root = data_dir / "partitions"
        self.root.mkdir(parents=True, exist_ok=True)
        # One log directory: an I/O error in any partition takes all of them offline.
        self.log_dir = LogDir(self.root)
        self.node_id = node_id
        self.source = source
        self.settings = settings
        self.bugs = BugSwitches.from_settings(settings)
        self.partitions: dict[TopicPartition, Partition] = {}
        self._waiters: dict[TopicPartition, set[asyncio.Future[None]]] = {}
        self._sync_lock = asyncio.Lock()
        self._tasks: list[asyncio.Task[None]] = []
        self._seen_epoch = -1

    # ---- lookup ----------------------------------------------------------------------
    def get(self, topic: str, index: int) -> Partition | None:
        return self.partitions.get((topic, index))

    async def ensure_known(self, keys: Iterable[TopicPartition]) -> None:
        """Refresh the cluster view (and open what it gives this node) once if any of
        ``keys`` is not open here: a partition created a moment ago is found. Handlers call
        it once per request, before their lookups: a request naming 10,000 partitions this
        node does not have costs one refresh, not 10,000 Metadata round trips to the
        controller (a typed fuzz case, a ListOffsets of 280 KB, took 45 s)."""
        if any(key not in self.partitions for key in keys):
            await self.sync(await self.source.refresh())

    # ---- life cycle ------------------------------------------------------------------
    async def start(self) -> None:
        await self.sync(self.source.view())
        self._tasks.append(asyncio.create_task(self._follow_view()))
        self._tasks.append(asyncio.create_task(self._retention_loop()))

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for partition in self.partitions.values():
            try:
                partition.close()
            except OSError:
                log.exception("closing %r failed", partition)
        self.partitions.clear()

    async def _follow_view(self) -> None:
        interval = self.settings.get("metadata.refresh.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            view = self.source.view()
            if view.epoch != self._seen_epoch:
                try:
                    await self.sync(view)
                except Exception:  # keep following the view: the next change may open it
                    log.exception("partition sync failed")

    async def _retention_loop(self) -> None:
        interval = self.settings.get("log.retention.check.interval.ms") / 1000
        while True:
            await asyncio.sleep(interval)
            now_ms = int(time.time() * 1000)
            for partition in list(self.partitions.values()):
                try:
                    partition.apply_retention(now_ms)
                    partition.remove_expired_producers(now_ms)
                except OSError:
                    pass  # the log directory is offline (logged when it failed)

    async def sync(self, view: ClusterView) -> None:
        """Open the partitions the view assigns here; drop those of deleted topics."""
        async with self._sync_lock:
            if not view.cluster_id:
                return  # no view pulled yet: never delete anything on an empty view
            self._seen_epoch = view.epoch
            wanted = {(t.name, p): t.topic_id for t, p in view.partitions_on(self.node_id)}
            for key, partition in list(self.partitions.items()):
                if wanted.get(key) != partition.topic_id:
                    self._drop(key, partition)
            for key, topic_id in wanted.items():
                if key not in self.partitions:
                    try:
                        await self._open(key, topic_id)
                    except Exception:
                        # One partition that cannot open (a bad directory, a full disk)
                        # must not keep the node from serving the others.
                        log.exception("cannot open %s-%d", key[0], key[1])
            self._remove_orphans(wanted)

    def _dir_for(self, key: TopicPartition) -> Path:
        return self.root / f"{key[0]}-{key[1]}"

    async def _open(self, key: TopicPartition, topic_id: uuid.UUID) -> None:
        directory = self._dir_for(key)
        existing = _read_topic_id(directory)
        if existing is not None and existing != topic_id:
            log.info("%s belongs to an older topic %s; removing it", directory, existing)
            shutil.rmtree(directory, ignore_errors=True)
        overrides = await self.source.topic_configs(key[0]) or {}
        partition = Partition(
            topic=key[0],
            topic_id=topic_id,
            index=key[1],
            directory=directory,
            config=log_config_for(overrides, self.settings, key[0]),
            producer_id_expiration_ms=self.settings.get("producer.id.expiration.ms"),
            bugs=self.bugs,
            log_dir=self.log_dir,
        )
        self.partitions[key] = partition
        log.info(
            "opened %s-%d at offsets [%d, %d)",
            key[0],
            key[1],
            partition.log_start_offset,
            partition.log_end_offset,
        )

    def _drop(self, key: TopicPartition, partition: Partition) -> None:
        log.info("removing %s-%d: its topic is gone", key[0], key[1])
        partition.close()
        del self.partitions[key]
        shutil.rmtree(self._dir_for(key), ignore_errors=True)
        self.notify(key)

    def _remove_orphans(self, wanted: dict[TopicPartition, uuid.UUID]) -> None:
        wanted_dirs = {self._dir_for(k).name for k in wanted}
        for child in self.root.iterdir():
            if child.is_dir() and child.name not in wanted_dirs:
                log.info("removing %s: no topic assigns it here", child)
                shutil.rmtree(child, ignore_errors=True)

    # ---- long-poll support ---------------------------------------------------------
    def notify(self, key: TopicPartition) -> None:
        waiters = self._waiters.pop(key, None)
        if waiters:
            for fut in waiters:
                if not fut.done():
                    fut.set_result(None)

    async def wait_for_data(self, keys: Iterable[TopicPartition], timeout: float) -> None:
        """Wait until any of ``keys`` gets an append, or ``timeout`` seconds pass."""
        if timeout <= 0:
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        keys = list(keys)
        for key in keys:
            self._waiters.setdefault(key, set()).add(fut)
        try:
            await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            pass
        finally:
            for key in keys:
                waiters = self._waiters.get(key)
                if waiters is not None:
                    waiters.discard(fut)
                    if not waiters:
                        del self._waiters[key]

    def flush_all(self) -> None:
        for partition in self.partitions.values():
            partition.flush()
