"""Server-only APIs: AddPartitionsToTxn v4+ (KIP-890 verification, sent by brokers)
and WriteTxnMarkers (sent by coordinators) need Kafka's CLUSTER_ACTION permission.

This cluster has no authentication, so a connection counts as a node's when its
client id starts with ``txnchaos-node-`` (the id every node uses towards its peers:
``txnchaos-node-<node id>``), as a Kafka cluster trusts its inter-broker principal.
Anything else gets CLUSTER_AUTHORIZATION_FAILED in the API's own response shape.
A test or tool that plays a coordinator on purpose (e.g. writing markers by hand)
uses such a client id; the setting ``txnchaos.cluster.action.authorization.enable``
(default true) turns the check off.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from ..controller.controller import NODE_CLIENT_PREFIX
from .dispatch import ApiRegistry, Handler, RequestContext

ADD_PARTITIONS_TO_TXN = 24
WRITE_TXN_MARKERS = 27
FIRST_SERVER_ONLY_VERSION = {ADD_PARTITIONS_TO_TXN: 4, WRITE_TXN_MARKERS: 0}
CLUSTER_AUTHORIZATION_FAILED = int(ErrorCode.cluster_authorization_failed)


def is_node(ctx: RequestContext) -> bool:
    client_id = ctx.client_id
    return client_id is not None and client_id.startswith(NODE_CLIENT_PREFIX)


def _refusal(ctx: RequestContext, request: Any) -> Any:
    if ctx.api_key == ADD_PARTITIONS_TO_TXN:
        return ctx.respond(
            throttle_time=0, error_code=CLUSTER_AUTHORIZATION_FAILED, results_by_transaction=[]
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
        if ctx.api_version >= FIRST_SERVER_ONLY_VERSION[ctx.api_key] and not is_node(ctx):
            return _refusal(ctx, request)
        return await handler(ctx, request)

    return guarded


def guard_server_only_apis(registry: ApiRegistry) -> None:
    """Put the cluster-action check in front of the server-only APIs served here."""
    for api_key in FIRST_SERVER_ONLY_VERSION:
        registry.wrap(api_key, _guarded)
