"""A small Kafka admin client for KIP-664's APIs, speaking the wire protocol through the
project's codec (kio schemas), so it works against any cluster that serves them.

It negotiates versions with ApiVersions per node and sends Metadata, FindCoordinator,
ListTransactions, DescribeTransactions, DescribeProducers and WriteTxnMarkers, as
Kafka's AdminClient does for ``kafka-transactions.sh``, and InitProducerId for KIP-939's
forceTerminateTransaction.
"""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from txnchaos.cluster.protocol.error_names import error_name

from ...cluster.net.client import PeerAuthenticationFailed, PeerConnection, PeerUnavailable
from ...cluster.protocol.build import make
from ...cluster.protocol.codec import ProtocolError, request_class
from ...cluster.security.sasl import SaslCredentials

#: Granted CLUSTER_ACTION by a txnchaos cluster's default settings (an admin abort is a
#: WriteTxnMarkers); any other cluster grants it by its own ACLs.
CLIENT_ID = "txnchaos-admin-transactions"

API_METADATA = 3
API_FIND_COORDINATOR = 10
API_VERSIONS = 18
API_INIT_PRODUCER_ID = 22
API_WRITE_TXN_MARKERS = 27
API_DESCRIBE_PRODUCERS = 61
API_DESCRIBE_TRANSACTIONS = 65
API_LIST_TRANSACTIONS = 66
API_DESCRIBE_ACLS = 29
API_CREATE_ACLS = 30
API_DELETE_ACLS = 31

#: The versions this client speaks: (lowest, highest).
VERSIONS: dict[int, tuple[int, int]] = {
    API_METADATA: (1, 12),
    API_FIND_COORDINATOR: (1, 6),
    API_WRITE_TXN_MARKERS: (1, 2),
    API_DESCRIBE_PRODUCERS: (0, 0),
    API_DESCRIBE_TRANSACTIONS: (0, 0),
    API_LIST_TRANSACTIONS: (0, 2),
    API_INIT_PRODUCER_ID: (0, 6),
    API_DESCRIBE_ACLS: (1, 3),  # v1+: pattern types (KIP-290)
    API_CREATE_ACLS: (1, 3),
    API_DELETE_ACLS: (1, 3),
}
KEY_TYPE_TRANSACTION = 1
TIMEOUT_S = 15.0
#: Errors a coordinator answers while it loads or moves: asked again, as Kafka's
#: AdminClient does (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE,
#: NOT_COORDINATOR), up to RETRIES times RETRY_BACKOFF_S apart.
RETRIABLE = frozenset({14, 15, 16})
RETRIES = 50
RETRY_BACKOFF_S = 0.2
CONCURRENT_TRANSACTIONS = 51
SASL_AUTHENTICATION_FAILED = 58
#: The timeout a force-terminate's InitProducerId names: valid under any
#: transaction.max.timeout.ms; the producer's next init sets its own.
FORCE_TERMINATE_TIMEOUT_MS = 1
T = TypeVar("T")


class AdminError(Exception):
    """The cluster could not be reached, or refused or could not answer a request;
    ``code``: the Kafka error code of a refusal, if that is what it was."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code


class Unreachable(AdminError):
    """No node of the cluster answered."""


def raise_for(error_code: Any, what: str) -> None:
    """AdminError naming ``what`` and the error, when ``error_code`` is not NONE."""
    code = int(error_code)
    if code:
        raise AdminError(f"{what}: {error_name(code)}", code)


@dataclass(frozen=True, slots=True)
class Broker:
    node_id: int
    host: str
    port: int


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class ClusterMetadata:
    brokers: dict[int, Broker]
    partitions: dict[tuple[str, int], PartitionInfo]
    topic_errors: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TransactionListing:
    transactional_id: str
    producer_id: int
    state: str
    coordinator: int


@dataclass(frozen=True, slots=True)
class TransactionDescription:
    transactional_id: str
    coordinator: int
    state: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    start_time_ms: int | None  # None: no transaction in progress
    partitions: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class ProducerState:
    producer_id: int
    producer_epoch: int
    last_sequence: int
    last_timestamp: int
    coordinator_epoch: int
    start_offset: int | None  # None: no open transaction


@dataclass(frozen=True, slots=True)
class AbortSpec:
    topic: str
    partition: int
    producer_id: int
    producer_epoch: int
    coordinator_epoch: int


class _Node:
    """One node: its connection and the API versions it serves."""

    def __init__(self, host: str, port: int, sasl: SaslCredentials | None) -> None:
        self.address = f"{host}:{port}"
        self.conn = PeerConnection(host, port, client_id=CLIENT_ID, sasl=sasl)
        self.versions: dict[int, tuple[int, int]] | None = None

    async def _negotiate(self) -> None:
        try:
            r = await self.conn.request(
                make(
                    request_class(API_VERSIONS, 3),
                    client_software_name="txnchaos-transactions",
                    client_software_version="1",
                ),
                TIMEOUT_S,
            )
        except ProtocolError:
            r = await self.conn.request(make(request_class(API_VERSIONS, 0), {}), TIMEOUT_S)
        self.versions = {
            int(k.api_key): (int(k.min_version), int(k.max_version)) for k in r.api_keys
        }

    async def send(self, api_key: int, body: Mapping[str, Any], min_version: int = 0) -> Any:
        """Send ``body`` at the highest version both sides speak (at least ``min_version``,
        for a field only later versions carry)."""
        try:
            if self.versions is None:
                await self._negotiate()
            version = self._version(api_key)
            if version < min_version:
                raise AdminError(
                    f"{self.address} serves api key {api_key} up to v{version}; this request "
                    f"needs v{min_version}"
                )
            return await self.conn.request(make(request_class(api_key, version), body), TIMEOUT_S)
        except PeerAuthenticationFailed as exc:  # not worth another node: same credentials
            raise AdminError(str(exc), SASL_AUTHENTICATION_FAILED) from exc
        except (PeerUnavailable, OSError) as exc:
            raise Unreachable(f"{self.address}: {exc}") from exc
        except ProtocolError as exc:
            raise AdminError(f"{self.address}: {exc}") from exc

    def _version(self, api_key: int) -> int:
        assert self.versions is not None
        low, high = VERSIONS[api_key]
        served = self.versions.get(api_key)
        if served is None or min(high, served[1]) < max(low, served[0]):
            raise AdminError(
                f"{self.address} does not serve api key {api_key} in versions {low}-{high} "
                f"(it serves {served or 'none'})"
            )
        return min(high, served[1])

    async def close(self) -> None:
        await self.conn.close()


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    out = []
    for part in bootstrap.split(","):
        host, _, port = part.strip().rpartition(":")
        out.append((host.strip("[]"), int(port)))
    return out


class AdminClient:
    """Async admin client; ``async with AdminClient(bootstrap) as admin: ...``; ``sasl``:
    the credentials every connection logs in with (``--command-config``)."""

    def __init__(self, bootstrap: str, sasl: SaslCredentials | None = None) -> None:
        self.bootstrap = parse_bootstrap(bootstrap)
        self.sasl = sasl
        self._nodes: dict[int, _Node] = {}
        self._seed: _Node | None = None
        self._metadata: ClusterMetadata | None = None

    async def __aenter__(self) -> AdminClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        nodes = list(self._nodes.values()) + ([self._seed] if self._seed else [])
        self._nodes.clear()
        self._seed = None
        for node in nodes:
            await node.close()

    # -- metadata ------------------------------------------------------------------
    async def _any_node(self) -> _Node:
        if self._seed is not None:
            return self._seed
        failures = []
        for host, port in self.bootstrap:
            node = _Node(host, port, self.sasl)
            try:
                await node.send(API_METADATA, {"topics": [], "allow_auto_topic_creation": False})
            except Unreachable as exc:
                failures.append(str(exc))
                await node.close()
                continue
            self._seed = node
            return node
        raise Unreachable("no bootstrap server answered (" + "; ".join(failures) + ")")

    async def metadata(self, topics: list[str] | None = None) -> ClusterMetadata:
        """Brokers and partitions (of ``topics``, or of every topic)."""
        seed = await self._any_node()
        r = await seed.send(
            API_METADATA,
            {
                "topics": None
                if topics is None
                else [{"name": t, "topic_id": None} for t in topics],
                "allow_auto_topic_creation": False,
                "include_topic_authorized_operations": False,
            },
        )
        brokers = {int(b.node_id): Broker(int(b.node_id), b.host, int(b.port)) for b in r.brokers}
        partitions: dict[tuple[str, int], PartitionInfo] = {}
        errors: dict[str, int] = {}
        for t in r.topics:
            if int(t.error_code):
                errors[str(t.name)] = int(t.error_code)
                continue
            for p in t.partitions:
                info = PartitionInfo(
                    str(t.name),
                    int(p.partition_index),
                    int(p.leader_id),
                    tuple(int(n) for n in p.replica_nodes),
                )
                partitions[(info.topic, info.partition)] = info
        self._metadata = ClusterMetadata(brokers, partitions, errors)
        return self._metadata

    # -- ACLs (any broker; the cluster keeps one set) ---------------------------------
    async def describe_acls(self, acl_filter: Mapping[str, Any]) -> Any:
        """DescribeAcls with one filter (fields as the request names them)."""
        r = await (await self._any_node()).send(API_DESCRIBE_ACLS, acl_filter)
        if int(r.error_code):
            raise AdminError(
                f"DescribeAcls refused: {error_name(int(r.error_code))}"
                + (f" ({r.error_message})" if r.error_message else ""),
                int(r.error_code),
            )
        return r

    async def create_acls(
        self, creations: Sequence[Mapping[str, Any]]
    ) -> list[tuple[int, str | None]]:
        """CreateAcls: (error code, message) per creation, in order."""
        r = await (await self._any_node()).send(API_CREATE_ACLS, {"creations": list(creations)})
        return [(int(x.error_code), x.error_message) for x in r.results]

    async def delete_acls(self, filters: Sequence[Mapping[str, Any]]) -> Any:
        """DeleteAcls: the response (a result per filter, with the ACLs it deleted)."""
        return await (await self._any_node()).send(API_DELETE_ACLS, {"filters": list(filters)})

    async def _node(self, node_id: int, address: tuple[str, int] | None = None) -> _Node:
        node = self._nodes.get(node_id)
        if node is not None:
            return node
        if address is None:
            md = self._metadata or await self.metadata([])
            broker = md.brokers.get(node_id)
            if broker is None:
                raise AdminError(f"broker {node_id} is not in the cluster's metadata")
            address = (broker.host, broker.port)
        node = self._nodes[node_id] = _Node(*address, self.sasl)
        return node

    # -- transactions (coordinators) -----------------------------------------------
    async def list_transactions(
        self,
        node_id: int,
        *,
        states: list[str] | None = None,
        producer_ids: list[int] | None = None,
        duration_ms: int = -1,
        pattern: str | None = None,
    ) -> list[TransactionListing]:
        """ListTransactions on one node (what the coordinator there knows)."""
        node = await self._node(node_id)
        needs = 2 if pattern is not None else 1 if duration_ms >= 0 else 0
        body = {
            "state_filters": states or [],
            "producer_id_filters": producer_ids or [],
            "duration_filter": duration_ms,
            "transactional_id_pattern": pattern,
        }
        r = await _retrying(lambda: self._list_once(node, node_id, body, needs))
        return [
            TransactionListing(
                str(t.transactional_id), int(t.producer_id), t.transaction_state, node_id
            )
            for t in r.transaction_states
        ]

    async def _list_once(self, node: _Node, node_id: int, body: dict[str, Any], needs: int) -> Any:
        r = await node.send(API_LIST_TRANSACTIONS, body, min_version=needs)
        raise_for(r.error_code, f"ListTransactions on broker {node_id}")
        return r

    async def find_coordinator(self, transactional_id: str) -> tuple[int, str, int]:
        return await _retrying(lambda: self._find_coordinator(transactional_id))

    async def _find_coordinator(self, transactional_id: str) -> tuple[int, str, int]:
        seed = await self._any_node()
        r = await seed.send(
            API_FIND_COORDINATOR,
            {
                "key": transactional_id,
                "key_type": KEY_TYPE_TRANSACTION,
                "coordinator_keys": [transactional_id],
            },
        )
        c = r.coordinators[0] if hasattr(r, "coordinators") else r
        raise_for(c.error_code, f"FindCoordinator for transactional id {transactional_id!r}")
        return int(c.node_id), c.host, int(c.port)

    async def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """DescribeTransactions at the id's coordinator (found again if it moved)."""
        return await _retrying(lambda: self._describe_transaction(transactional_id))

    async def _describe_transaction(self, transactional_id: str) -> TransactionDescription:
        node_id, host, port = await self._find_coordinator(transactional_id)
        node = await self._node(node_id, (host, port))
        r = await node.send(API_DESCRIBE_TRANSACTIONS, {"transactional_ids": [transactional_id]})
        (s,) = r.transaction_states
        raise_for(
            s.error_code, f"DescribeTransactions for {transactional_id!r} on broker {node_id}"
        )
        start: datetime.datetime | None = s.transaction_start_time
        return TransactionDescription(
            transactional_id=transactional_id,
            coordinator=node_id,
            state=s.transaction_state,
            producer_id=int(s.producer_id),
            producer_epoch=int(s.producer_epoch),
            timeout_ms=int(s.transaction_timeout.total_seconds() * 1000),
            start_time_ms=None if start is None else round(start.timestamp() * 1000),
            partitions=tuple(
                sorted((str(t.topic), int(p)) for t in s.topics for p in t.partitions)
            ),
        )

    async def force_terminate(self, transactional_id: str) -> tuple[int, int]:
        """KIP-939's forceTerminateTransaction: InitProducerId with KeepPreparedTxn false
        at the id's coordinator, which aborts its open (even prepared) transaction and
        fences its producer. Asked again while the abort completes (CONCURRENT_TRANSACTIONS).
        Returns the producer id and epoch the id has now."""
        for _ in range(RETRIES - 1):
            try:
                return await _retrying(lambda: self._init_producer_id(transactional_id))
            except AdminError as exc:
                if exc.code != CONCURRENT_TRANSACTIONS:
                    raise
            await asyncio.sleep(RETRY_BACKOFF_S)
        return await _retrying(lambda: self._init_producer_id(transactional_id))

    async def _init_producer_id(self, transactional_id: str) -> tuple[int, int]:
        node_id, host, port = await self._find_coordinator(transactional_id)
        node = await self._node(node_id, (host, port))
        r = await node.send(
            API_INIT_PRODUCER_ID,
            {
                "transactional_id": transactional_id,
                "transaction_timeout": FORCE_TERMINATE_TIMEOUT_MS,
                "enable2_pc": False,
                "keep_prepared_txn": False,
            },
        )
        raise_for(
            r.error_code,
            f"InitProducerId (force-terminate) for {transactional_id!r} on broker {node_id}",
        )
        return int(r.producer_id), int(r.producer_epoch)

    # -- partitions (leaders or replicas) ------------------------------------------
    async def describe_producers(
        self, partitions: list[tuple[str, int]], broker: int | None = None
    ) -> dict[tuple[str, int], list[ProducerState]]:
        """DescribeProducers, sent to each partition's leader (or to ``broker``)."""
        md = self._metadata
        if md is None or any(tp not in md.partitions for tp in partitions):
            md = await self.metadata(sorted({t for t, _ in partitions}))
        by_node: dict[int, list[tuple[str, int]]] = {}
        for tp in partitions:
            info = md.partitions.get(tp)
            if info is None:
                why = md.topic_errors.get(tp[0])
                raise AdminError(
                    f"partition {tp[0]}-{tp[1]} is not in the cluster's metadata"
                    + ("" if why is None else f" ({error_name(why)})"),
                    why,
                )
            target = info.leader if broker is None else broker
            if target < 0:
                raise AdminError(f"partition {tp[0]}-{tp[1]} has no leader")
            by_node.setdefault(target, []).append(tp)
        out: dict[tuple[str, int], list[ProducerState]] = {}
        for node_id, tps in sorted(by_node.items()):
            topics: dict[str, list[int]] = {}
            for t, p in tps:
                topics.setdefault(t, []).append(p)
            node = await self._node(node_id)
            r = await node.send(
                API_DESCRIBE_PRODUCERS,
                {"topics": [{"name": t, "partition_indexes": ps} for t, ps in topics.items()]},
            )
            for t in r.topics:
                for p in t.partitions:
                    if int(p.error_code):
                        raise AdminError(
                            f"DescribeProducers for {t.name}-{p.partition_index} on broker "
                            f"{node_id}: {error_name(int(p.error_code))}"
                        )
                    out[(str(t.name), int(p.partition_index))] = [
                        ProducerState(
                            int(a.producer_id),
                            int(a.producer_epoch),
                            int(a.last_sequence),
                            int(a.last_timestamp),
                            int(a.coordinator_epoch),
                            _offset(int(a.current_txn_start_offset)),
                        )
                        for a in p.active_producers
                    ]
        return out

    async def abort(self, spec: AbortSpec) -> None:
        """WriteTxnMarkers (ABORT) for one partition, sent to its leader (KIP-664)."""
        md = await self.metadata([spec.topic])
        info = md.partitions.get((spec.topic, spec.partition))
        if info is None or info.leader < 0:
            raise AdminError(f"partition {spec.topic}-{spec.partition} has no known leader")
        node = await self._node(info.leader)
        r = await node.send(
            API_WRITE_TXN_MARKERS,
            {
                "markers": [
                    {
                        "producer_id": spec.producer_id,
                        "producer_epoch": spec.producer_epoch,
                        "transaction_result": False,
                        "coordinator_epoch": spec.coordinator_epoch,
                        "topics": [{"name": spec.topic, "partition_indexes": [spec.partition]}],
                    }
                ]
            },
        )
        codes = [int(p.error_code) for m in r.markers for t in m.topics for p in t.partitions]
        if codes != [0]:
            names = ", ".join(error_name(c) for c in codes) or "an empty answer"
            raise AdminError(
                f"WriteTxnMarkers (abort of producer {spec.producer_id} epoch "
                f"{spec.producer_epoch} on {spec.topic}-{spec.partition}) refused by broker "
                f"{info.leader}: {names}"
            )


def _offset(value: int) -> int | None:
    return None if value < 0 else value


async def _retrying(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, asked again while the answer is a retriable coordinator error."""
    for _ in range(RETRIES - 1):
        try:
            return await call()
        except AdminError as exc:
            if exc.code not in RETRIABLE:
                raise
        await asyncio.sleep(RETRY_BACKOFF_S)
    return await call()
