"""The controller: owns topics, assignments, broker liveness and producer-id blocks.

It serves CreateTopics, DeleteTopics, BrokerRegistration, BrokerHeartbeat,
AllocateProducerIds and UpdateFeatures (finalized feature levels, see
``features``). Every change is saved before it is acknowledged. A broker that
misses heartbeats for ``broker.session.timeout.ms`` is fenced: its partitions show
no leader (one replica) until it registers again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kio.schema.errors import ErrorCode

from ..features import (
    SAFE_DOWNGRADE,
    TRANSACTION_VERSION,
    UPGRADE,
    FeatureUpdate,
    finalized,
    validate_update,
)
from ..metadata import NO_LEADER, ClusterView, NodeEndpoint, TopicMeta
from ..server.dispatch import ApiRegistry, RequestContext
from ..settings import NodeSettings
from .state import ControllerStore, TopicRecord
from .topic_config import InvalidTopicConfig, validate_topic_configs

log = logging.getLogger(__name__)

MAX_PARTITIONS_PER_REQUEST = 10_000
"""Partitions one CreateTopics request may create in all, as Kafka's controller bounds it."""

PRODUCER_ID_BLOCK = 1000
NODE_CLIENT_PREFIX = "txnchaos-node-"
MAX_PROPAGATION_WAIT_S = 10.0
_LEGAL_TOPIC = re.compile(r"^[a-zA-Z0-9._-]+$")
MAX_TOPIC_NAME = 249
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
"""Names reserved for the coordinators' state: never created as ordinary topics."""


@dataclass(slots=True)
class RegisteredNode:
    node_id: int
    host: str
    port: int
    roles: frozenset[str]
    broker_epoch: int
    last_heartbeat: float
    fenced: bool = False


def _wait_budget(request: Any) -> float:
    timeout_s = request.timeout.total_seconds()
    return min(timeout_s, MAX_PROPAGATION_WAIT_S) if timeout_s > 0 else 0.0


def requesting_node(ctx: RequestContext) -> int | None:
    """The node that sent a request (its client id names it), None for clients."""
    client_id = ctx.client_id
    if not client_id or not client_id.startswith(NODE_CLIENT_PREFIX):
        return None
    try:
        return int(client_id.removeprefix(NODE_CLIENT_PREFIX))
    except ValueError:
        return None


def topic_name_error(name: str) -> str | None:
    if not name:
        return "Topic name is illegal, it can't be empty"
    if name in (".", ".."):
        return 'Topic name cannot be "." or ".."'
    if len(name) > MAX_TOPIC_NAME:
        return f"Topic name is illegal, it can't be longer than {MAX_TOPIC_NAME} characters"
    if not _LEGAL_TOPIC.match(name):
        return (
            f'Topic name "{name}" is illegal, it contains a character other than '
            "ASCII alphanumerics, '.', '_' and '-'"
        )
    return None


class Controller:
    def __init__(
        self,
        directory: Path,
        node_id: int,
        settings: NodeSettings,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.node_id = node_id
        self.settings = settings
        self.clock = clock
        self.store = ControllerStore(directory)
        self.state = self.store.load()
        if self.state.features is None:
            # Bootstrap, as Kafka's storage format: later changes go through UpdateFeatures.
            self.state.features = {TRANSACTION_VERSION: settings.get("transaction.version")}
            self.store.save(self.state)
        self.nodes: dict[int, RegisteredNode] = {}
        self._next_broker_epoch = int(time.time() * 1000)
        self._changed = asyncio.Event()
        self._pulled = asyncio.Event()
        self.pulled_epoch: dict[int, int] = {}  # node -> epoch of its latest metadata pull
        self._view: ClusterView | None = None
        self._liveness_task: asyncio.Task[None] | None = None

    # ---- lifecycle -------------------------------------------------------------------
    def register_local_node(self, node_id: int, host: str, port: int, roles: frozenset[str]):
        """The node hosting the controller registers itself without a round trip."""
        self.nodes[node_id] = RegisteredNode(
            node_id, host, port, roles, self._new_epoch(), self.clock()
        )
        self._bump()

    async def start(self) -> None:
        self._liveness_task = asyncio.create_task(self._fence_silent_nodes())

    async def stop(self) -> None:
        if self._liveness_task is not None:
            self._liveness_task.cancel()

    def _new_epoch(self) -> int:
        self._next_broker_epoch += 1
        return self._next_broker_epoch

    def _bump(self) -> None:
        self.state.epoch += 1
        self._view = None
        self._changed.set()
        self._changed = asyncio.Event()

    async def _fence_silent_nodes(self) -> None:
        timeout = self.settings.get("broker.session.timeout.ms") / 1000
        while True:
            await asyncio.sleep(min(timeout / 4, 1.0))
            now = self.clock()
            for node in self.nodes.values():
                if node.node_id == self.node_id:
                    continue
                if not node.fenced and now - node.last_heartbeat > timeout:
                    log.warning("fencing node %d: no heartbeat for %.1fs", node.node_id, timeout)
                    node.fenced = True
                    self._bump()

    # ---- the view brokers read -----------------------------------------------------
    def view(self) -> ClusterView:
        if self._view is None:
            live = {n.node_id for n in self.nodes.values() if not n.fenced}
            topics = {
                t.name: TopicMeta(
                    name=t.name,
                    topic_id=t.topic_id,
                    leaders=tuple(r if r in live else NO_LEADER for r in t.replicas),
                    replicas=tuple(t.replicas),
                )
                for t in self.state.topics.values()
            }
            nodes = {
                n.node_id: NodeEndpoint(n.node_id, n.host, n.port)
                for n in self.nodes.values()
                if not n.fenced
            }
            self._view = ClusterView(
                cluster_id=self.state.cluster_id,
                controller_id=self.node_id,
                epoch=self.state.epoch,
                nodes=nodes,
                topics=topics,
                features=finalized(self.state.features or {}),
                features_epoch=self.state.epoch,
            )
        return self._view

    def topic_configs(self, name: str) -> dict[str, str] | None:
        record = self.state.topics.get(name)
        return None if record is None else dict(record.configs)

    # ---- operations ----------------------------------------------------------------
    def create_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: dict[str, str | None],
        assignments: dict[int, list[int]] | None = None,
        validate_only: bool = False,
    ) -> tuple[int, str | None, TopicRecord | None]:
        """Returns (error_code, error_message, record)."""
        problem = topic_name_error(name)
        if problem:
            return ErrorCode.invalid_topic_exception, problem, None
        if name in INTERNAL_TOPICS:
            # The coordinators' own state (Kafka's internal topics, which always exist
            # there): an ordinary topic of that name took its markers to the wrong node.
            return (
                ErrorCode.topic_already_exists,
                f"Topic '{name}' is internal: the coordinators keep it.",
                None,
            )
        if name in self.state.topics:
            return ErrorCode.topic_already_exists, f"Topic '{name}' already exists.", None
        brokers = sorted(
            n.node_id for n in self.nodes.values() if "broker" in n.roles and not n.fenced
        )
        if num_partitions == -1:
            num_partitions = self.settings.get("num.partitions")
        if replication_factor == -1:
            replication_factor = self.settings.get("default.replication.factor")
        if assignments:
            if any(len(b) != 1 for b in assignments.values()):
                return (
                    ErrorCode.invalid_replica_assignment,
                    "txnchaos nodes keep one replica per partition",
                    None,
                )
            if sorted(assignments) != list(range(len(assignments))):
                return ErrorCode.invalid_replica_assignment, "partitions must be 0..n-1", None
            unknown = {b[0] for b in assignments.values()} - set(brokers)
            if unknown:
                return (
                    ErrorCode.invalid_replica_assignment,
                    f"unknown or fenced brokers {sorted(unknown)}",
                    None,
                )
            replicas = [assignments[p][0] for p in range(len(assignments))]
        else:
            if num_partitions <= 0:
                return (
                    ErrorCode.invalid_partitions,
                    "Number of partitions must be larger than 0.",
                    None,
                )
            if replication_factor <= 0:
                return (
                    ErrorCode.invalid_replication_factor,
                    "Replication factor must be larger than 0.",
                    None,
                )
            if replication_factor != 1:
                return (
                    ErrorCode.invalid_replication_factor,
                    f"Replication factor {replication_factor} is not supported: txnchaos "
                    "nodes keep one replica per partition.",
                    None,
                )
            if not brokers:
                return ErrorCode.invalid_replication_factor, "No live brokers.", None
            start = sum(len(t.replicas) for t in self.state.topics.values())
            replicas = [brokers[(start + p) % len(brokers)] for p in range(num_partitions)]
        try:
            overrides = validate_topic_configs(configs)
        except InvalidTopicConfig as exc:
            return ErrorCode.invalid_config, str(exc), None
        record = TopicRecord(name, uuid.uuid4(), replicas, overrides)
        if validate_only:
            return ErrorCode.none, None, record
        self.state.topics[name] = record
        self.store.save(self.state)
        self._bump()
        log.info("created topic %s (%d partitions) on %s", name, len(replicas), replicas)
        return ErrorCode.none, None, record

    def delete_topic(self, name: str | None, topic_id: uuid.UUID | None) -> tuple[int, str | None]:
        record = None
        if name:
            record = self.state.topics.get(name)
        elif topic_id is not None:
            record = next((t for t in self.state.topics.values() if t.topic_id == topic_id), None)
        if record is None:
            if name:
                return ErrorCode.unknown_topic_or_partition, "This server does not host this topic."
            return ErrorCode.unknown_topic_id, "This server does not host this topic ID."
        del self.state.topics[record.name]
        self.store.save(self.state)
        self._bump()
        log.info("deleted topic %s", record.name)
        return ErrorCode.none, record.name

    def update_features(
        self, updates: list[FeatureUpdate], validate_only: bool
    ) -> tuple[int, str | None]:
        """Apply feature updates all or nothing; (error code, message)."""
        names = [u.name for u in updates]
        if len(set(names)) != len(names):
            return ErrorCode.invalid_request, "The request contains a feature more than once."
        current = dict(self.state.features or {})
        for update in updates:
            code, message = validate_update(current, update)
            if code:
                return code, message
        if validate_only:
            return ErrorCode.none, None
        for update in updates:
            current[update.name] = update.level
        self.state.features = current
        self.store.save(self.state)
        self._bump()
        log.info("finalized features now %s", current)
        return ErrorCode.none, None

    def allocate_producer_ids(self) -> tuple[int, int]:
        start = self.state.next_producer_id
        self.state.next_producer_id = start + PRODUCER_ID_BLOCK
        self.store.save(self.state)
        return start, PRODUCER_ID_BLOCK

    def register_node(self, node_id: int, host: str, port: int, roles: frozenset[str]) -> int:
        epoch = self._new_epoch()
        self.nodes[node_id] = RegisteredNode(node_id, host, port, roles, epoch, self.clock())
        self._bump()
        log.info("registered node %d at %s:%d roles=%s", node_id, host, port, sorted(roles))
        return epoch

    def heartbeat(self, node_id: int, broker_epoch: int) -> int:
        node = self.nodes.get(node_id)
        if node is None or node.broker_epoch != broker_epoch:
            return ErrorCode.stale_broker_epoch
        node.last_heartbeat = self.clock()
        if node.fenced:
            node.fenced = False
            self._bump()
        return ErrorCode.none

    async def wait_for_change(self, timeout: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), timeout)

    # ---- metadata propagation ------------------------------------------------------
    # Brokers pull the cluster view with Metadata requests. Their heartbeats long-poll:
    # the controller holds a heartbeat until the view changes, then answers
    # is_caught_up=false and the broker pulls at once. CreateTopics and DeleteTopics
    # answer only once every live broker has pulled the change (bounded by the
    # request's timeout), so a client that just created a topic finds it everywhere.
    def note_metadata_pull(self, client_id: str | None) -> None:
        if not client_id or not client_id.startswith(NODE_CLIENT_PREFIX):
            return
        try:
            node_id = int(client_id.removeprefix(NODE_CLIENT_PREFIX))
        except ValueError:
            return
        self.pulled_epoch[node_id] = self.state.epoch
        self._pulled.set()
        self._pulled = asyncio.Event()

    def _lagging(self, epoch: int, requester: int | None = None) -> list[int]:
        return [
            n.node_id
            for n in self.nodes.values()
            if n.node_id != self.node_id
            and n.node_id != requester
            and not n.fenced
            and self.pulled_epoch.get(n.node_id, -1) < epoch
        ]

    async def wait_until_propagated(
        self, timeout: float, requester: int | None = None
    ) -> list[int]:
        """Wait until every live node has pulled the current view; returns laggards.

        ``requester`` is a node that forwarded the request (auto-creation, UpdateFeatures):
        it is not waited for. It pulls the view itself once answered, and over the very
        connection the answer goes out on, which serves one request at a time: waiting
        for it waited out the whole budget (its heartbeats stuck behind too, so it was
        fenced) and its forwarded request timed out."""
        epoch = self.state.epoch
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while self._lagging(epoch, requester) and loop.time() < deadline:
            try:
                await asyncio.wait_for(self._pulled.wait(), deadline - loop.time())
            except TimeoutError:
                break
        return self._lagging(epoch, requester)

    def is_caught_up(self, node_id: int) -> bool:
        return self.pulled_epoch.get(node_id, -1) >= self.state.epoch

    # ---- Kafka API handlers -----------------------------------------------------------
    def register(self, registry: ApiRegistry) -> None:
        registry.register(19, 2, 7, self._create_topics, owner="controller")
        registry.register(20, 1, 6, self._delete_topics, owner="controller")
        registry.register(62, 0, 0, self._broker_registration, owner="controller")
        registry.register(63, 0, 0, self._broker_heartbeat, owner="controller")
        registry.register(67, 0, 0, self._allocate_producer_ids, owner="controller")
        registry.register(57, 0, 2, self._update_features, owner="controller")

    def _requested_partitions(self, request: Any) -> int:
        default = self.settings.get("num.partitions")
        total = 0
        for t in request.topics:
            if t.assignments:
                total += len(t.assignments)
            elif t.num_partitions == -1:
                total += default
            elif t.num_partitions > 0:
                total += t.num_partitions
        return total

    async def _create_topics(self, ctx: RequestContext, request: Any) -> Any:
        if self._requested_partitions(request) > MAX_PARTITIONS_PER_REQUEST:
            # Kafka's controller refuses the whole request, validate_only or not.
            refused = {
                "error_code": ErrorCode.policy_violation,
                "error_message": "Excessively large number of partitions per request.",
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            }
            return ctx.respond(
                throttle_time=0, topics=[{"name": t.name, **refused} for t in request.topics]
            )
        results = []
        seen: dict[str, int] = {}
        for t in request.topics:
            seen[t.name] = seen.get(t.name, 0) + 1
        for t in request.topics:
            if seen[t.name] > 1:
                results.append(
                    {
                        "name": t.name,
                        "error_code": ErrorCode.invalid_request,
                        "error_message": "Duplicate topic name.",
                    }
                )
                continue
            assignments = {a.partition_index: list(a.broker_ids) for a in t.assignments}
            code, message, record = self.create_topic(
                t.name,
                t.num_partitions,
                t.replication_factor,
                {c.name: c.value for c in t.configs},
                assignments or None,
                validate_only=request.validate_only,
            )
            result: dict[str, Any] = {
                "name": t.name,
                "error_code": code,
                "error_message": message,
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            }
            if record is not None:
                result.update(
                    topic_id=record.topic_id,
                    num_partitions=record.num_partitions,
                    replication_factor=1,
                    configs=[
                        {
                            "name": k,
                            "value": v,
                            "read_only": False,
                            "config_source": 1,
                            "is_sensitive": False,
                        }
                        for k, v in sorted(record.configs.items())
                    ],
                )
            results.append(result)
        if not request.validate_only:
            await self.wait_until_propagated(_wait_budget(request), requesting_node(ctx))
        return ctx.respond(throttle_time=0, topics=results)

    async def _delete_topics(self, ctx: RequestContext, request: Any) -> Any:
        results = []
        if hasattr(request, "topics"):
            targets = [(t.name, t.topic_id) for t in request.topics]
        else:
            targets = [(n, None) for n in request.topic_names]
        for name, topic_id in targets:
            if topic_id is not None and topic_id.int == 0:
                topic_id = None
            code, detail = self.delete_topic(name, topic_id)
            record_name = detail if code == ErrorCode.none else name
            results.append(
                {
                    "name": record_name,
                    "topic_id": topic_id,
                    "error_code": code,
                    "error_message": None if code == ErrorCode.none else detail,
                }
            )
        await self.wait_until_propagated(_wait_budget(request), requesting_node(ctx))
        return ctx.respond(throttle_time=0, responses=results)

    async def _broker_registration(self, ctx: RequestContext, request: Any) -> Any:
        if request.cluster_id != self.state.cluster_id:
            return ctx.respond(error_code=ErrorCode.inconsistent_cluster_id, broker_epoch=-1)
        if not request.listeners:
            return ctx.respond(error_code=ErrorCode.invalid_request, broker_epoch=-1)
        listener = request.listeners[0]
        roles = frozenset(
            f.name.removeprefix("txnchaos.role.")
            for f in request.features
            if f.name.startswith("txnchaos.role.")
        ) or frozenset({"broker"})
        epoch = self.register_node(request.broker_id, listener.host, listener.port, roles)
        return ctx.respond(error_code=0, broker_epoch=epoch)

    async def _broker_heartbeat(self, ctx: RequestContext, request: Any) -> Any:
        code = self.heartbeat(request.broker_id, request.broker_epoch)
        if code == ErrorCode.none and self.is_caught_up(request.broker_id):
            hold = self.settings.get("broker.heartbeat.interval.ms") / 1000
            await self.wait_for_change(hold)
        return ctx.respond(
            error_code=code,
            is_caught_up=self.is_caught_up(request.broker_id),
            is_fenced=code != 0,
            should_shut_down=False,
        )

    async def _allocate_producer_ids(self, ctx: RequestContext, request: Any) -> Any:
        node = self.nodes.get(request.broker_id)
        if node is None or node.broker_epoch != request.broker_epoch:
            return ctx.respond(error_code=ErrorCode.stale_broker_epoch)
        start, length = self.allocate_producer_ids()
        return ctx.respond(error_code=0, producer_id_start=start, producer_id_len=length)

    async def _update_features(self, ctx: RequestContext, request: Any) -> Any:
        updates = [
            FeatureUpdate(
                u.feature,
                u.max_version_level,
                (SAFE_DOWNGRADE if u.allow_downgrade else UPGRADE)
                if ctx.api_version == 0
                else u.upgrade_type,
            )
            for u in request.feature_updates
        ]
        validate_only = bool(getattr(request, "validate_only", False))
        code, message = self.update_features(updates, validate_only)
        if code == ErrorCode.none and not validate_only:
            await self.wait_until_propagated(_wait_budget(request), requesting_node(ctx))
        fields: dict[str, Any] = {
            "throttle_time": 0,
            "error_code": code,
            "error_message": message,
        }
        if ctx.api_version < 2:  # v2 dropped the per-feature results
            fields["results"] = [
                {"feature": u.name, "error_code": code, "error_message": message} for u in updates
            ]
        return ctx.respond(**fields)
