"""One node process: a Kafka-protocol server hosting the broker role, the
coordinator role, or both.

Roles are separate components that register their APIs on the node's registry:

* coordinator: the controller (cluster metadata) and the group coordinator;
  transactions join it next.
* broker: the partitions (storage, idempotent producer state) and Produce, Fetch,
  ListOffsets, DeleteRecords, InitProducerId for idempotent producers.

Every node answers ApiVersions, Metadata, DescribeCluster, DescribeConfigs and
FindCoordinator. A node without the controller reaches it over TCP at an address
from its configuration, and advertises itself at an address from its
configuration, so the harness can put a proxy on every link.

When the node serves, it writes ``node.json`` (its id, roles, pid and bound ports)
into its data directory; launchers wait for that file.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import signal
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from .broker.describe_producers_api import DescribeProducersApi
from .broker.fetch_api import FetchApi
from .broker.offsets_api import OffsetsApi
from .broker.partition_manager import PartitionManager
from .broker.produce_api import ProduceApi
from .broker.txn_markers_api import WriteTxnMarkersApi
from .broker.txn_verification import TxnVerifier
from .cluster_info.describe_api import DescribeApis
from .cluster_info.find_coordinator_api import FindCoordinatorApi
from .cluster_info.metadata_api import MetadataApi
from .cluster_info.update_features_api import ForwardedUpdateFeatures
from .controller.controller import NODE_CLIENT_PREFIX, Controller
from .coordinator.groups import GroupConfig, GroupCoordinator
from .coordinator.groups.txn_offset_commit_api import (
    group_marker_sink,
    register_txn_offset_commit,
)
from .coordinator.groups.txn_offset_verification import TxnOffsetVerification
from .coordinator.placement import KEY_TYPE_GROUP, KEY_TYPE_TRANSACTION, CoordinatorPlacement
from .coordinator.transactions.admin_api import TransactionAdminApis
from .coordinator.transactions.config import TxnConfig
from .coordinator.transactions.coordinator import TransactionCoordinator
from .coordinator.transactions.factory import create_transaction_coordinator
from .coordinator.transactions.init_producer_id_api import InitProducerIdApi
from .features import SUPPORTED
from .metadata_source import LocalMetadataSource, MetadataSource, RemoteMetadataSource
from .metrics import (
    NodeMetrics,
    PartitionGauges,
    TransactionCounters,
    TransactionMarkerGauges,
    TransactionOpenTimeGauge,
    VerificationMetrics,
)
from .net.client import use_sasl_for_peers
from .producer_ids import ProducerIdBlocks
from .security.acl_apis import SecurityDisabledAclApis
from .security.install import AccessControl
from .security.metrics import AuthenticationMetrics
from .server.cluster_action import guard_server_only_apis
from .server.dispatch import ApiRegistry
from .server.limits import ConnectionLimits
from .server.server import KafkaServer, register_api_versions
from .settings import NodeSettings

log = logging.getLogger(__name__)

ROLES = ("broker", "coordinator")


@dataclass
class NodeConfig:
    node_id: int
    roles: frozenset[str]
    data_dir: Path
    host: str = "127.0.0.1"
    port: int = 0
    advertised_host: str | None = None
    advertised_port: int | None = None
    controller: tuple[str, int] | None = None  # None: this node hosts the controller
    metrics_host: str = "127.0.0.1"
    metrics_port: int = 0
    settings: NodeSettings = field(default_factory=NodeSettings)
    # The coordinator nodes of the cluster (the same list on every node); None: the
    # node hosting the controller is the only coordinator.
    coordinator_ids: tuple[int, ...] | None = None
    # node id -> (host, port) to use for that peer instead of its advertised address
    # (the harness points these at its fault proxies).
    peers: dict[int, tuple[str, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = set(self.roles) - set(ROLES)
        if not self.roles or unknown:
            raise ValueError(
                f"roles must be a non-empty subset of {ROLES}, got {sorted(self.roles)}"
            )
        if self.controller is None and "coordinator" not in self.roles:
            raise ValueError("a node without the coordinator role needs --controller HOST:PORT")


def connection_limits(settings: NodeSettings) -> ConnectionLimits:
    return ConnectionLimits(
        max_connections=settings.get("max.connections"),
        max_connections_per_ip=settings.get("max.connections.per.ip"),
        queued_max_requests=settings.get("queued.max.requests"),
        queued_max_request_bytes=settings.get("queued.max.request.bytes"),
        connections_max_idle_ms=settings.get("connections.max.idle.ms"),
    )


class Node:
    def __init__(self, config: NodeConfig) -> None:
        self.config = config
        self.registry = ApiRegistry()
        self.metrics = NodeMetrics(config.node_id)
        self.server = KafkaServer(
            self.registry,
            host=config.host,
            port=config.port,
            max_frame_bytes=config.settings.get("socket.request.max.bytes"),
            observer=self.metrics.observe,
            limits=connection_limits(config.settings),
        )
        self.controller: Controller | None = None
        self.source: MetadataSource | None = None
        self.partitions: PartitionManager | None = None
        self.groups: GroupCoordinator | None = None
        self.transactions: TransactionCoordinator | None = None
        self.verifier: TxnVerifier | None = None
        self.offsets_verification: TxnOffsetVerification | None = None
        self.access: AccessControl | None = None
        security = config.settings.security
        if security.active:
            use_sasl_for_peers(security.inter_node)  # before any peer connection exists
            self.access = AccessControl(
                security,
                self._topic_name,
                config.settings.get("connection.failed.authentication.delay.ms"),
            )
        self._stopped = asyncio.Event()

    def _topic_name(self, topic_id: uuid.UUID) -> str | None:
        meta = None if self.source is None else self.source.view().topic_by_id(topic_id)
        return None if meta is None else meta.name

    def placement(self) -> CoordinatorPlacement:
        """Where groups and transactional ids live (fixed by configuration)."""
        settings = self.config.settings
        ids = self.config.coordinator_ids
        if not ids:
            assert self.source is not None
            ids = (
                (self.config.node_id,)
                if self.hosts_controller
                else (self.source.view().controller_id,)
            )
        return CoordinatorPlacement(
            ids,
            group_partitions=settings.get("offsets.topic.num.partitions"),
            transaction_partitions=settings.get("transaction.state.log.num.partitions"),
        )

    def node_address(self, node_id: int) -> tuple[str, int] | None:
        """How this node reaches a peer: a configured override, else its advertised address."""
        if node_id in self.config.peers:
            return self.config.peers[node_id]
        assert self.source is not None
        node = self.source.view().nodes.get(node_id)
        return None if node is None else (node.host, node.port)

    @property
    def is_broker(self) -> bool:
        return "broker" in self.config.roles

    @property
    def hosts_controller(self) -> bool:
        return self.config.controller is None

    async def start(self) -> None:
        cfg = self.config
        cfg.data_dir.mkdir(parents=True, exist_ok=True)
        port = await self.server.bind()
        advertised_host = cfg.advertised_host or cfg.host
        advertised_port = cfg.advertised_port or port

        if self.hosts_controller:
            self.controller = Controller(cfg.data_dir / "controller", cfg.node_id, cfg.settings)
            self.controller.register(self.registry)
            self.controller.register_local_node(
                cfg.node_id, advertised_host, advertised_port, cfg.roles
            )
            await self.controller.start()
            self.source = LocalMetadataSource(self.controller, cfg.settings)
        else:
            assert cfg.controller is not None
            self.source = RemoteMetadataSource(
                node_id=cfg.node_id,
                roles=cfg.roles,
                advertised_host=advertised_host,
                advertised_port=advertised_port,
                controller_host=cfg.controller[0],
                controller_port=cfg.controller[1],
                settings=cfg.settings,
            )
        source = self.source
        register_api_versions(
            self.registry,
            self.server,
            features=lambda: (source.view().features, source.view().features_epoch),
            supported=SUPPORTED,
        )
        if not self.hosts_controller:
            ForwardedUpdateFeatures(self.source).register(self.registry)
        MetadataApi(
            self.source,
            cfg.settings,
            on_served=self.controller.note_metadata_pull if self.controller else None,
        ).register(self.registry)
        DescribeApis(self.source, cfg.settings, cfg.node_id).register(self.registry)
        FindCoordinatorApi(self.source, self.placement).register(self.registry)

        self.producer_ids = ProducerIdBlocks(self.source)
        # KIP-890 part 1: brokers (Produce) and group coordinators (TxnOffsetCommit)
        # verify old clients' first writes with the transaction coordinator while
        # transaction.partition.verification.enable is on, at every transaction.version
        # (as Kafka); TV2 requests (Produce v12, TxnOffsetCommit v5) always have the
        # coordinator add the partition.
        self.verifier = TxnVerifier(
            self.placement, self.node_address, client_id=f"{NODE_CLIENT_PREFIX}{cfg.node_id}"
        )
        verify_setting = cfg.settings.get("transaction.partition.verification.enable")

        def verification_active() -> bool:
            return bool(verify_setting)

        self.offsets_verification = TxnOffsetVerification(self.verifier, verification_active)
        self.metrics.add_collector(VerificationMetrics(self.verifier.stats))
        if "coordinator" in cfg.roles:
            self._create_coordinators()
        if self.is_broker:
            self.partitions = PartitionManager(cfg.data_dir, cfg.node_id, self.source, cfg.settings)
            ProduceApi(self.partitions, self.verifier, verification_active).register(self.registry)
            FetchApi(
                self.partitions,
                max_bytes=cfg.settings.get("fetch.max.bytes"),
                replica_max_bytes=cfg.settings.get("replica.fetch.response.max.bytes"),
            ).register(self.registry)
            OffsetsApi(self.partitions).register(self.registry)
            manager = self.partitions
            self.metrics.add_collector(
                PartitionGauges(
                    lambda: list(manager.partitions.values()),
                    cfg.settings.get("transaction.max.timeout.ms"),
                    cfg.settings.get("txnchaos.late.transaction.buffer.ms"),
                )
            )
        # Every node hands out producer ids; transactional ids need the local coordinator.
        InitProducerIdApi(self.producer_ids, self.transactions).register(self.registry)
        TransactionAdminApis(self.transactions).register(self.registry)
        if self.partitions is not None:
            DescribeProducersApi(self.partitions).register(self.registry)
        # Markers land on brokers (partitions) and on coordinators (transactional offsets).
        WriteTxnMarkersApi(
            self.partitions,
            group_sink=group_marker_sink(self.groups, self.offsets_verification)
            if self.groups
            else None,
        ).register(self.registry)
        authorizing = self.access is not None and self.access.authorizer is not None
        if cfg.settings.get("txnchaos.cluster.action.authorization.enable") and not authorizing:
            guard_server_only_apis(self.registry)

        if self.access is None:  # no authorizer: the ACL APIs say so (Kafka's AclApis)
            SecurityDisabledAclApis().register(self.registry)
        if self.access is not None:  # last: it guards every API registered above
            self.metrics.add_collector(AuthenticationMetrics(self.access.authenticator))
            self.access.install(
                self.registry,
                self.server,
                controller_dir=cfg.data_dir / "controller" if self.hosts_controller else None,
                controller=cfg.controller,
                client_id=f"{NODE_CLIENT_PREFIX}{cfg.node_id}",
                refresh_interval_s=cfg.settings.get("metadata.refresh.interval.ms") / 1000,
            )

        await self.source.start()  # registered with the controller; the view is known
        if self.access is not None:
            await self.access.start()  # the controller's ACLs, before serving
        placement = self.placement()
        if self.groups is not None:
            await self.groups.start(placement.owned_partitions(cfg.node_id, KEY_TYPE_GROUP))
        if self.transactions is not None:
            await self.transactions.start(
                placement.owned_partitions(cfg.node_id, KEY_TYPE_TRANSACTION)
            )
        if self.partitions is not None:
            await self.partitions.start()  # recovers every local partition before serving
        await self.server.serve()
        metrics_port = self.metrics.serve(cfg.metrics_host, cfg.metrics_port)
        self._write_node_file(port, metrics_port, advertised_host, advertised_port)
        log.info(
            "node %d (%s) serving on %s:%d, metrics on %s:%d",
            cfg.node_id,
            ",".join(sorted(cfg.roles)),
            cfg.host,
            port,
            cfg.metrics_host,
            metrics_port,
        )

    def _create_coordinators(self) -> None:
        """The coordinator role: groups and transactions, registered but not yet loaded."""
        cfg = self.config
        source = self.source
        assert source is not None

        def partition_count(topic: str) -> int | None:
            meta = source.view().topic(topic)
            return None if meta is None else meta.num_partitions

        self.groups = GroupCoordinator(
            cfg.data_dir / "groups",
            num_partitions=cfg.settings.get("offsets.topic.num.partitions"),
            topic_partition_count=partition_count,
            config=GroupConfig(
                initial_rebalance_delay_ms=cfg.settings.get("group.initial.rebalance.delay.ms"),
                min_session_timeout_ms=cfg.settings.get("group.min.session.timeout.ms"),
                max_session_timeout_ms=cfg.settings.get("group.max.session.timeout.ms"),
            ),
        )
        self.groups.register(self.registry)
        register_txn_offset_commit(self.registry, self.groups, self.offsets_verification)
        self.transactions = create_transaction_coordinator(
            cfg.data_dir / "transactions",
            producer_ids=self.producer_ids,
            view=source.view,
            refresh_view=source.refresh,
            node_address=self.node_address,
            internal_partition_owner=lambda p: self.placement().owner_of_partition(p),
            config=TxnConfig.from_settings(cfg.settings),
            client_id=f"{NODE_CLIENT_PREFIX}{cfg.node_id}",
        )
        self.transactions.register(self.registry)
        self.metrics.add_collector(TransactionCounters(self.transactions.counters))
        self.metrics.add_collector(
            TransactionOpenTimeGauge(self.transactions.active_transaction_open_time_max_ms)
        )
        self.metrics.add_collector(TransactionMarkerGauges(self.transactions.markers))

    def _write_node_file(
        self, port: int, metrics_port: int, advertised_host: str, advertised_port: int
    ) -> None:
        doc = {
            "id": self.config.node_id,
            "roles": sorted(self.config.roles),
            "pid": os.getpid(),
            "host": self.config.host,
            "port": port,
            "advertised_host": advertised_host,
            "advertised_port": advertised_port,
            "metrics_port": metrics_port,
        }
        path = self.config.data_dir / "node.json"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc))
        os.replace(tmp, path)

    async def stop(self) -> None:
        log.info("node %d stopping", self.config.node_id)
        (self.config.data_dir / "node.json").unlink(missing_ok=True)
        await self.server.stop()
        if self.access is not None:
            await self.access.stop()
        if self.partitions is not None:
            await self.partitions.stop()
        if self.verifier is not None:
            await self.verifier.close()
        if self.transactions is not None:
            await self.transactions.stop()
        if self.groups is not None:
            await self.groups.stop()
        if self.source is not None:
            await self.source.stop()
        if self.controller is not None:
            await self.controller.stop()
        self.metrics.stop()

    async def run_until_signalled(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stopped.set)
        await self.start()
        await self._stopped.wait()
        await self.stop()


PROFILE_ENV = "TXNCHAOS_NODE_PROFILE_DIR"
"""Development aid: when set, the node runs under cProfile and writes
``node-<id>.prof`` into that directory when it stops cleanly."""


def run_node(config: NodeConfig) -> None:
    profile_dir = os.environ.get(PROFILE_ENV)
    if not profile_dir:
        asyncio.run(Node(config).run_until_signalled())
        return
    import cProfile

    profiler = cProfile.Profile()
    try:
        profiler.runcall(asyncio.run, Node(config).run_until_signalled())
    finally:
        Path(profile_dir).mkdir(parents=True, exist_ok=True)
        profiler.dump_stats(str(Path(profile_dir) / f"node-{config.node_id}.prof"))
