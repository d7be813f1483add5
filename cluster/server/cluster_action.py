"""Server-only APIs on a cluster without an authorizer: AddPartitionsToTxn v4+ (KIP-890
verification, sent by brokers) and the controller's node APIs (BrokerRegistration,
BrokerHeartbeat, AllocateProducerIds) need Kafka's CLUSTER_ACTION permission. Kafka
serves the controller's APIs on its controller listener only; here they stay on the one
listener but behind this check always (issue 35: a client's BrokerRegistration of a
ghost broker id left new partitions leaderless for good, and re-registering a real id
pointed the cluster at another port).

This cluster has no authentication, so a connection counts as a node's when its
client id starts with ``txnchaos-node-`` (the id every node uses towards its peers:
``txnchaos-node-<node id>``), as a Kafka cluster trusts its inter-broker principal.
Anything else gets CLUSTER_AUTHORIZATION_FAILED in the API's own response shape. A test
that plays a broker on purpose uses a node's client id; the setting
``txnchaos.cluster.action.authorization.enable`` (default true) turns the check off.

WriteTxnMarkers is not guarded here: Kafka without an authorizer serves it to anyone,
which KIP-664's admin abort (Kafka's own ``kafka-transactions.sh abort``, ``txnchaos
transactions abort``) relies on; no client id grants anything. With an authorizer the
ACLs decide (ALTER or CLUSTER_ACTION on the cluster, ``security/rules.py``).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..controller.controller import NODE_CLIENT_PREFIX
from .dispatch import ApiRegistry, Handler, RequestContext

ADD_PARTITIONS_TO_TXN = 24
WRITE_TXN_MARKERS = 27
BROKER_REGISTRATION = 62
BROKER_HEARTBEAT = 63
ALLOCATE_PRODUCER_IDS = 67
NODE_ONLY_APIS = frozenset({BROKER_REGISTRATION, BROKER_HEARTBEAT, ALLOCATE_PRODUCER_IDS})
"""Sent by nodes only, never by an operator."""
FIRST_SERVER_ONLY_VERSION = {
    ADD_PARTITIONS_TO_TXN: 4,
    **dict.fromkeys(NODE_ONLY_APIS, 0),
}
CLUSTER_AUTHORIZATION_FAILED = int(ErrorCode.cluster_authorization_failed)


def is_node(ctx: RequestContext) -> bool:
    client_id = ctx.client_id
    return client_id is not None and client_id.startswith(NODE_CLIENT_PREFIX)


def refuse_cluster_action(ctx: RequestContext, request: Any) -> Any:
    """The CLUSTER_AUTHORIZATION_FAILED answer to a server-only request (WriteTxnMarkers, or
    AddPartitionsToTxn v4+) from a client without CLUSTER_ACTION."""
    if ctx.api_key == ADD_PARTITIONS_TO_TXN:
        return ctx.respond(
            throttle_time=0, error_code=CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[]
        )
    if ctx.api_key in NODE_ONLY_APIS:
        return ctx.respond(
            throttle_time=0,
            error_code=CLUSTER_AUTHORIZATION_FAILED,
            broker_epoch=-1,
            is_caught_up=False,
            is_fenced=True,
            should_shut_down=False,
            producer_id_start=-1,
            producer_id_len=0,
        )
    return ctx.respond(
        markers=[
            {
                "producer_id": m.producer_id,
                "topics": [
                    {
                        "name": t.name,
                        "partitions": [
                            {"partition_index": p, "error_code": CLUSTER_AUTHORIZATION_FAILED}
                            for p in t.partition_indexes
                        ],
                    }
                    for t in m.topics
                ],
            }
            for m in request.markers
        ]
    )


def _guarded(handler: Handler) -> Handler:
    async def guarded(ctx: RequestContext, request: Any) -> Any:
        server_only = ctx.api_version >= FIRST_SERVER_ONLY_VERSION[ctx.api_key]
        if server_only and not is_node(ctx):
            return refuse_cluster_action(ctx, request)
        return await handler(ctx, request)

    return guarded


def guard_server_only_apis(registry: ApiRegistry) -> None:
    """Put the cluster-action check in front of the server-only APIs served here."""
    for api_key in FIRST_SERVER_ONLY_VERSION:
        registry.wrap(api_key, _guarded)
