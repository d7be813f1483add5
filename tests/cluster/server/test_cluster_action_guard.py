"""The cluster-action guard of a cluster without an authorizer: AddPartitionsToTxn v4+
and the controller's node APIs are the nodes' (client id ``txnchaos-node-*``);
WriteTxnMarkers is anyone's, as Kafka without an authorizer serves it (KIP-664's admin
abort, Kafka's own ``kafka-transactions.sh abort`` included). No client id is an admin."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.server.cluster_action import guard_server_only_apis
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.settings import NodeSettings, SettingsError

CLUSTER_AUTHORIZATION_FAILED = 31
MARKERS = make(
    request_class(27, 1),
    markers=[
        {
            "producer_id": 5,
            "producer_epoch": 0,
            "transaction_result": False,
            "coordinator_epoch": -1,
            "topics": [{"name": "t", "partition_indexes": [0]}],
        }
    ],
)
VERIFY = make(
    request_class(24, 4),
    transactions=[
        {
            "transactional_id": "x",
            "producer_id": 5,
            "producer_epoch": 0,
            "verify_only": True,
            "topics": [{"name": "t", "partitions": [0]}],
        }
    ],
)


def _answer(api_key: int, version: int, request: Any, client_id: str | None) -> Any:
    async def handle(ctx: RequestContext, request: Any) -> Any:
        return "served"

    registry = ApiRegistry()
    registry.register(api_key, 0 if api_key == 24 else 1, 5 if api_key == 24 else 2, handle, "t")
    guard_server_only_apis(registry)
    spec = registry.get(api_key)
    assert spec is not None
    ctx = RequestContext(api_key, version, 1, client_id, "127.0.0.1:1", 1)
    return asyncio.run(spec.handler(ctx, request))


@pytest.mark.parametrize(
    "client_id", ["txnchaos-admin-transactions", "adminclient-1", "txnchaos-node-3", None]
)
def test_write_txn_markers_is_served_to_anyone(client_id: str | None) -> None:
    assert _answer(27, 1, MARKERS, client_id) == "served"


@pytest.mark.parametrize("client_id", ["txnchaos-admin-transactions", "adminclient-1", None])
def test_broker_verification_stays_the_nodes(client_id: str | None) -> None:
    answer = _answer(24, 4, VERIFY, client_id)
    assert answer != "served" and int(answer.error_code) == CLUSTER_AUTHORIZATION_FAILED
    assert _answer(24, 4, VERIFY, "txnchaos-node-1") == "served"


def test_the_admin_prefix_setting_is_gone() -> None:
    with pytest.raises(SettingsError):
        NodeSettings.from_pairs(["txnchaos.cluster.action.client.ids=ops-"])
