"""CLUSTER_ACTION (server-only APIs): nodes, and the operators whose client ids start with
a prefix of ``txnchaos.cluster.action.client.ids`` (an admin abort is a WriteTxnMarkers)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import request_class
from txnchaos.cluster.server.cluster_action import admin_prefixes, guard_server_only_apis
from txnchaos.cluster.server.dispatch import ApiRegistry, RequestContext
from txnchaos.cluster.settings import NodeSettings

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


def _answer(admins: tuple[str, ...], client_id: str | None) -> Any:
    served: list[str | None] = []

    async def handle(ctx: RequestContext, request: Any) -> Any:
        served.append(ctx.client_id)
        return "served"

    registry = ApiRegistry()
    registry.register(27, 1, 2, handle, owner="t")
    guard_server_only_apis(registry, admins)
    spec = registry.get(27)
    assert spec is not None
    ctx = RequestContext(27, 1, 1, client_id, "127.0.0.1:1", 1)
    return asyncio.run(spec.handler(ctx, MARKERS))


def _refused(answer: Any) -> bool:
    if answer == "served":
        return False
    codes = [int(p.error_code) for m in answer.markers for t in m.topics for p in t.partitions]
    return codes == [CLUSTER_AUTHORIZATION_FAILED]


def test_the_default_grants_the_tool() -> None:
    default = admin_prefixes(NodeSettings().get("txnchaos.cluster.action.client.ids"))
    assert default == ("txnchaos-admin",)
    assert not _refused(_answer(default, "txnchaos-admin-transactions"))
    assert not _refused(_answer(default, "txnchaos-node-3"))


@pytest.mark.parametrize("client_id", ["txnchaos-test", "adminclient-1", None, ""])
def test_other_clients_are_refused(client_id: str | None) -> None:
    assert _refused(_answer(("txnchaos-admin",), client_id))


def test_the_setting_names_prefixes_or_nobody() -> None:
    admins = admin_prefixes(" ops-, kafka-python ,")
    assert admins == ("ops-", "kafka-python")
    assert not _refused(_answer(admins, "kafka-python-3.0"))
    assert _refused(_answer(admin_prefixes(""), "txnchaos-admin-transactions"))
