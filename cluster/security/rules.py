"""Which permission each API needs, and the error Kafka answers without it
(KafkaApis' authorize calls). A rule gets the request and the real handler: it
refuses the whole request, or calls the handler with the permitted part and adds
the refused entries to its response, so nothing refused reaches a handler (and
nothing refused is written). Read-only answers are filtered after the handler."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from ..coordinator.transactions.admin_api import error_state
from ..protocol.codec import EncodedResponse
from ..server.cluster_action import refuse_cluster_action
from ..server.dispatch import Handler, RequestContext
from ..server.server import CloseConnection
from .acl import CLUSTER_NAME, Operation, ResourceType
from .authorizer import Authorizer

TOPIC_AUTHORIZATION_FAILED = 29
GROUP_AUTHORIZATION_FAILED = 30
CLUSTER_AUTHORIZATION_FAILED = 31
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
ZERO_UUID = uuid.UUID(int=0)

READ, WRITE, DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE
TOPIC, GROUP, CLUSTER = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
TXN = ResourceType.TRANSACTIONAL_ID


@dataclass(slots=True)
class Access:
    """One request's principal and host, and what the authorizer lets them do."""

    authorizer: Authorizer
    principal: str
    host: str
    topic_name: Callable[[uuid.UUID], str | None]

    def allowed(self, op: Operation, rtype: ResourceType, name: str) -> bool:
        return self.authorizer.authorize(self.principal, self.host, op, rtype, name)

    def cluster(self, op: Operation) -> bool:
        return self.allowed(op, CLUSTER, CLUSTER_NAME)

    def any_topic(self, op: Operation) -> bool:
        """KIP-679: some topic grants ``op`` to this principal (idempotent producers)."""
        return self.authorizer.allows_some(self.principal, self.host, op, TOPIC)


Rule = Callable[[Access, RequestContext, Any, Handler], Awaitable[Any]]


def _entity(response: Any) -> Any:
    return response.entity if isinstance(response, EncodedResponse) else response


def _extend(response: Any, field: str, extra: Iterable[Any]) -> Any:
    response = _entity(response)
    return dataclasses.replace(response, **{field: (*getattr(response, field), *extra)})


def _replace(obj: Any, **fields: Any) -> Any:
    if "error_code" in fields:  # kio writes error codes from the enum
        fields["error_code"] = ErrorCode(fields["error_code"])
    return dataclasses.replace(obj, **fields)


async def _serve_allowed(
    ctx: RequestContext,
    handler: Handler,
    req: Any,
    ok: Iterable[Any],
    refused: Iterable[Any],
    *,
    request_field: str,
    response_field: str,
) -> Any:
    """The handler's answer to the allowed entries (``request_field`` of ``req``) with the
    refused entries' answers appended to ``response_field``; only the refusals when nothing
    is allowed (the handler never sees a refused entry)."""
    ok, refused = tuple(ok), tuple(refused)
    if not ok:
        return ctx.respond(**{response_field: refused}, throttle_time=0)
    allowed = _replace(req, **{request_field: ok})
    return _extend(await handler(ctx, allowed), response_field, refused)


# -- Produce, Fetch, ListOffsets, Metadata ------------------------------------------------
def _produce_refusals(topics: Iterable[Any], code: int, by_id: bool) -> list[dict[str, Any]]:
    return [
        {
            **({"topic_id": t.topic_id} if by_id else {"name": t.name}),
            "partition_responses": [
                {"index": p.index, "error_code": code, "base_offset": -1, "log_start_offset": -1}
                for p in t.partition_data
            ],
        }
        for t in topics
    ]


async def produce(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    tid = req.transactional_id
    by_id = ctx.api_version >= 13  # Produce v13 names topics by id (KIP-516)
    ok: list[Any] = []
    bad: list[Any] = []
    if tid is not None and not a.allowed(WRITE, TXN, tid):
        bad, code = list(req.topic_data), TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        code = TOPIC_AUTHORIZATION_FAILED
        for t in req.topic_data:
            name = a.topic_name(t.topic_id) if by_id else t.name
            # an unknown id goes on: the handler answers it UNKNOWN_TOPIC_ID (as Kafka)
            (ok if name is None or a.allowed(WRITE, TOPIC, name) else bad).append(t)
    if not bad:
        return await handler(ctx, req)
    if req.acks == 0:
        raise CloseConnection  # Kafka closes an acks=0 producer's connection on an error
    refusals = _produce_refusals(bad, code, by_id)
    refused = ctx.respond(responses=refusals, throttle_time=0).responses
    return await _serve_allowed(
        ctx, handler, req, ok, refused, request_field="topic_data", response_field="responses"
    )


async def fetch(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    by_id = ctx.api_version >= 13
    replica = req.replica_state.replica_id if ctx.api_version >= 15 else req.replica_id
    ok: list[Any] = []
    bad: list[Any] = []
    for t in req.topics:
        if replica >= 0:
            permitted = a.cluster(Operation.CLUSTER_ACTION)
        else:
            name = a.topic_name(t.topic_id) if by_id else t.topic
            permitted = name is None or a.allowed(READ, TOPIC, name)
        (ok if permitted else bad).append(t)
    if not bad:
        return await handler(ctx, req)
    refused = [
        {
            "topic": getattr(t, "topic", ""),
            "topic_id": getattr(t, "topic_id", ZERO_UUID),
            "partitions": [
                {
                    "partition_index": p.partition,
                    "error_code": TOPIC_AUTHORIZATION_FAILED,
                    "high_watermark": -1,
                    "last_stable_offset": -1,
                    "log_start_offset": -1,
                    "records": None,
                }
                for p in t.partitions
            ],
        }
        for t in bad
    ]
    entries = ctx.respond(responses=refused, throttle_time=0, error_code=0).responses
    if not ok:
        return ctx.respond(responses=entries, throttle_time=0, error_code=0, session_id=0)
    return _extend(await handler(ctx, _replace(req, topics=tuple(ok))), "responses", entries)


async def list_offsets(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    ok: list[Any] = []
    bad: list[Any] = []
    for t in req.topics:
        (ok if a.allowed(DESCRIBE, TOPIC, t.name) else bad).append(t)
    if not bad:
        return await handler(ctx, req)
    refused = ctx.respond(
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "error_code": TOPIC_AUTHORIZATION_FAILED,
                        "timestamp": -1,
                        "offset": -1,
                    }
                    for p in t.partitions
                ],
            }
            for t in bad
        ]
    ).topics
    return await _serve_allowed(
        ctx, handler, req, ok, refused, request_field="topics", response_field="topics"
    )


async def metadata(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    if req.topics is None:  # every topic: those it may not describe are left out
        response = _entity(await handler(ctx, req))
        kept = tuple(t for t in response.topics if a.allowed(DESCRIBE, TOPIC, t.name))
        return _replace(response, topics=kept)
    ok: list[Any] = []
    bad: list[Any] = []
    for t in req.topics:
        name = t.name if t.name is not None else a.topic_name(getattr(t, "topic_id", ZERO_UUID))
        (ok if name is None or a.allowed(DESCRIBE, TOPIC, name) else bad).append((t, name))
    sub = req
    auto = getattr(req, "allow_auto_topic_creation", False)
    if bad or (auto and not a.cluster(Operation.CREATE)):
        may_create = all(
            n is not None and a.allowed(Operation.CREATE, TOPIC, n) for _, n in ok
        ) or a.cluster(Operation.CREATE)
        fields: dict[str, Any] = {"topics": tuple(t for t, _ in ok)}
        if hasattr(req, "allow_auto_topic_creation"):
            fields["allow_auto_topic_creation"] = auto and may_create
        sub = _replace(req, **fields)
    response = await handler(ctx, sub)
    if not bad:
        return response
    refused = ctx.respond(
        topics=[
            {
                "error_code": TOPIC_AUTHORIZATION_FAILED,
                "name": name,
                "topic_id": getattr(t, "topic_id", ZERO_UUID),
                "is_internal": False,
                "partitions": [],
            }
            for t, name in bad
        ],
        brokers=[],
    ).topics
    return _extend(response, "topics", refused)


# -- groups -------------------------------------------------------------------------------
def _group_refusal(ctx: RequestContext) -> Any:
    return ctx.respond(error_code=GROUP_AUTHORIZATION_FAILED, throttle_time=0, members=[])


async def group_member(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    """JoinGroup, Heartbeat, LeaveGroup, SyncGroup: READ on the group."""
    if not a.allowed(READ, GROUP, req.group_id):
        return _group_refusal(ctx)
    return await handler(ctx, req)


def _commit_refusals(topics: Iterable[Any], code: int) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "partitions": [
                {"partition_index": p.partition_index, "error_code": code} for p in t.partitions
            ],
        }
        for t in topics
    ]


async def _commit(
    a: Access, ctx: RequestContext, req: Any, handler: Handler, first: int | None
) -> Any:
    ok: list[Any] = []
    bad: list[Any] = []
    if first is not None:
        bad, code = list(req.topics), first
    else:
        code = TOPIC_AUTHORIZATION_FAILED
        for t in req.topics:
            (ok if a.allowed(READ, TOPIC, t.name) else bad).append(t)
    if not bad:
        return await handler(ctx, req)
    refused = ctx.respond(topics=_commit_refusals(bad, code), throttle_time=0).topics
    return await _serve_allowed(
        ctx, handler, req, ok, refused, request_field="topics", response_field="topics"
    )


async def offset_commit(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    denied = None if a.allowed(READ, GROUP, req.group_id) else GROUP_AUTHORIZATION_FAILED
    return await _commit(a, ctx, req, handler, denied)


async def txn_offset_commit(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    denied = None
    if not a.allowed(WRITE, TXN, req.transactional_id):
        denied = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    elif not a.allowed(READ, GROUP, req.group_id):
        denied = GROUP_AUTHORIZATION_FAILED
    return await _commit(a, ctx, req, handler, denied)


def _fetched_topics(a: Access, topics: Iterable[Any], listed: bool) -> tuple[Any, ...]:
    """OffsetFetch topics: unlisted (all) ones it may not describe are left out, listed
    ones answered with TOPIC_AUTHORIZATION_FAILED."""
    out = []
    for t in topics:
        if a.allowed(DESCRIBE, TOPIC, t.name):
            out.append(t)
        elif listed:
            parts = tuple(
                _replace(
                    p,
                    committed_offset=-1,
                    metadata="",
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                )
                for p in t.partitions
            )
            out.append(_replace(t, partitions=parts))
    return tuple(out)


async def offset_fetch(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    if ctx.api_version < 8:
        if not a.allowed(DESCRIBE, GROUP, req.group_id):
            return ctx.respond(error_code=GROUP_AUTHORIZATION_FAILED, topics=[], throttle_time=0)
        response = _entity(await handler(ctx, req))
        topics = _fetched_topics(a, response.topics, req.topics is not None)
        return _replace(response, topics=topics)
    listed = {g.group_id: g.topics is not None for g in req.groups}
    response = _entity(await handler(ctx, req))
    groups = []
    for g in response.groups:
        if not a.allowed(DESCRIBE, GROUP, g.group_id):
            groups.append(_replace(g, topics=(), error_code=GROUP_AUTHORIZATION_FAILED))
        else:
            groups.append(
                _replace(g, topics=_fetched_topics(a, g.topics, listed.get(g.group_id, True)))
            )
    return _replace(response, groups=tuple(groups))


async def describe_groups(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    response = _entity(await handler(ctx, req))
    groups = tuple(
        g
        if a.allowed(DESCRIBE, GROUP, g.group_id)
        else _replace(
            g,
            error_code=GROUP_AUTHORIZATION_FAILED,
            group_state="",
            protocol_type="",
            protocol_data="",
            members=(),
        )
        for g in response.groups
    )
    return _replace(response, groups=groups)


async def list_groups(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    response = _entity(await handler(ctx, req))
    if a.cluster(DESCRIBE):
        return response
    kept = tuple(g for g in response.groups if a.allowed(DESCRIBE, GROUP, g.group_id))
    return _replace(response, groups=kept)


async def delete_groups(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    ok = [g for g in req.groups_names if a.allowed(Operation.DELETE, GROUP, g)]
    bad = [g for g in req.groups_names if g not in ok]
    if not bad:
        return await handler(ctx, req)
    refused = ctx.respond(
        results=[{"group_id": g, "error_code": GROUP_AUTHORIZATION_FAILED} for g in bad]
    ).results
    return await _serve_allowed(
        ctx, handler, req, ok, refused, request_field="groups_names", response_field="results"
    )


async def find_coordinator(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    def refusal(key: str) -> int | None:
        if req.key_type == 1:
            return None if a.allowed(DESCRIBE, TXN, key) else TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        return None if a.allowed(DESCRIBE, GROUP, key) else GROUP_AUTHORIZATION_FAILED

    if ctx.api_version < 4:
        code = refusal(req.key)
        if code is None:
            return await handler(ctx, req)
        return ctx.respond(error_code=code, node_id=-1, host="", port=-1, throttle_time=0)
    ok = [k for k in req.coordinator_keys if refusal(k) is None]
    bad = [k for k in req.coordinator_keys if k not in ok]
    if not bad:
        return await handler(ctx, req)
    refused = ctx.respond(
        coordinators=[
            {"key": k, "node_id": -1, "host": "", "port": -1, "error_code": refusal(k)} for k in bad
        ]
    ).coordinators
    return await _serve_allowed(
        ctx,
        handler,
        req,
        ok,
        refused,
        request_field="coordinator_keys",
        response_field="coordinators",
    )


# -- transactions -------------------------------------------------------------------------
async def init_producer_id(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    tid = req.transactional_id
    if tid is not None:
        permitted = a.allowed(WRITE, TXN, tid)
        if permitted and getattr(req, "enable2_pc", False):  # KIP-939
            permitted = a.allowed(Operation.TWO_PHASE_COMMIT, TXN, tid)
        code = TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    else:
        permitted = a.cluster(Operation.IDEMPOTENT_WRITE) or a.any_topic(WRITE)
        code = CLUSTER_AUTHORIZATION_FAILED
    if permitted:
        return await handler(ctx, req)
    return ctx.respond(error_code=code, producer_id=-1, producer_epoch=-1, throttle_time=0)


async def add_partitions_to_txn(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    if ctx.api_version >= 4:  # sent by brokers only (KIP-890 verification)
        if a.cluster(Operation.CLUSTER_ACTION):
            return await handler(ctx, req)
        return refuse_cluster_action(ctx, req)
    topics = req.v3_and_below_topics
    if not a.allowed(WRITE, TXN, req.v3_and_below_transactional_id):
        codes = {t.name: TRANSACTIONAL_ID_AUTHORIZATION_FAILED for t in topics}
    else:
        codes = {
            t.name: TOPIC_AUTHORIZATION_FAILED
            for t in topics
            if not a.allowed(WRITE, TOPIC, t.name)
        }
        if not codes:
            return await handler(ctx, req)
    return ctx.respond(
        throttle_time=0,
        results_by_topic_v3_and_below=[
            {
                "name": t.name,
                "results_by_partition": [
                    {
                        "partition_index": p,
                        "partition_error_code": codes.get(t.name, OPERATION_NOT_ATTEMPTED),
                    }
                    for p in t.partitions
                ],
            }
            for t in topics
        ],
    )


async def add_offsets_to_txn(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    if not a.allowed(WRITE, TXN, req.transactional_id):
        return ctx.respond(error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED, throttle_time=0)
    if not a.allowed(READ, GROUP, req.group_id):
        return ctx.respond(error_code=GROUP_AUTHORIZATION_FAILED, throttle_time=0)
    return await handler(ctx, req)


async def end_txn(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    if not a.allowed(WRITE, TXN, req.transactional_id):
        return ctx.respond(
            error_code=TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            throttle_time=0,
            producer_id=-1,
            producer_epoch=-1,
        )
    return await handler(ctx, req)


async def write_txn_markers(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    """Kafka 4.x (KafkaApis.handleWriteTxnMarkersRequest): ALTER on the cluster (an
    operator's abort, KIP-664) or CLUSTER_ACTION (the coordinators)."""
    if a.cluster(Operation.ALTER) or a.cluster(Operation.CLUSTER_ACTION):
        return await handler(ctx, req)
    return refuse_cluster_action(ctx, req)


async def describe_transactions(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    response = _entity(await handler(ctx, req))
    states = []
    for s in response.transaction_states:
        if not a.allowed(DESCRIBE, TXN, s.transactional_id):
            blank = ctx.respond(
                transaction_states=[
                    error_state(s.transactional_id, TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
                ]
            )
            states.append(blank.transaction_states[0])
        else:
            topics = tuple(t for t in s.topics if a.allowed(DESCRIBE, TOPIC, t.topic))
            states.append(_replace(s, topics=topics))
    return _replace(response, transaction_states=tuple(states))


async def list_transactions(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    response = _entity(await handler(ctx, req))
    kept = tuple(
        s for s in response.transaction_states if a.allowed(DESCRIBE, TXN, s.transactional_id)
    )
    return _replace(response, transaction_states=kept)


async def describe_producers(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    response = _entity(await handler(ctx, req))
    topics = []
    for t in response.topics:
        if not a.allowed(READ, TOPIC, t.name):
            parts = tuple(
                _replace(
                    p,
                    error_code=TOPIC_AUTHORIZATION_FAILED,
                    error_message=None,
                    active_producers=(),
                )
                for p in t.partitions
            )
            t = _replace(t, partitions=parts)
        topics.append(t)
    return _replace(response, topics=tuple(topics))


# -- topics, configs, features, cluster-internal ------------------------------------------
async def create_topics(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    cluster_ok = a.cluster(Operation.CREATE)
    ok = [t for t in req.topics if cluster_ok or a.allowed(Operation.CREATE, TOPIC, t.name)]
    bad = [t for t in req.topics if t not in ok]
    if not bad:
        return await handler(ctx, req)
    refused = ctx.respond(
        topics=[
            {
                "name": t.name,
                "topic_id": ZERO_UUID,
                "error_code": TOPIC_AUTHORIZATION_FAILED,
                "error_message": "Authorization failed.",
                "num_partitions": -1,
                "replication_factor": -1,
                "configs": None,
            }
            for t in bad
        ]
    ).topics
    return await _serve_allowed(
        ctx, handler, req, ok, refused, request_field="topics", response_field="topics"
    )


async def delete_topics(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    def name_of(t: Any) -> str | None:
        if isinstance(t, str):
            return t
        return t.name if t.name is not None else a.topic_name(t.topic_id)

    items = req.topics if ctx.api_version >= 6 else req.topic_names
    ok = [t for t in items if (n := name_of(t)) is None or a.allowed(Operation.DELETE, TOPIC, n)]
    bad = [t for t in items if t not in ok]
    if not bad:
        return await handler(ctx, req)
    refused = ctx.respond(
        responses=[
            {
                "name": name_of(t),
                "topic_id": getattr(t, "topic_id", ZERO_UUID),
                "error_code": TOPIC_AUTHORIZATION_FAILED,
            }
            for t in bad
        ]
    ).responses
    field = "topics" if ctx.api_version >= 6 else "topic_names"
    return await _serve_allowed(
        ctx, handler, req, ok, refused, request_field=field, response_field="responses"
    )


async def delete_records(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    ok = [t for t in req.topics if a.allowed(Operation.DELETE, TOPIC, t.name)]
    bad = [t for t in req.topics if t not in ok]
    if not bad:
        return await handler(ctx, req)
    refused = ctx.respond(
        topics=[
            {
                "name": t.name,
                "partitions": [
                    {
                        "partition_index": p.partition_index,
                        "low_watermark": -1,
                        "error_code": TOPIC_AUTHORIZATION_FAILED,
                    }
                    for p in t.partitions
                ],
            }
            for t in bad
        ]
    ).topics
    return await _serve_allowed(
        ctx, handler, req, ok, refused, request_field="topics", response_field="topics"
    )


#: DescribeConfigs' resource types (ConfigResource.Type) and how Kafka authorizes each:
#: TOPIC and GROUP by their name, BROKER, BROKER_LOGGER and CLIENT_METRICS on the cluster
_CONFIG_TOPIC, _CONFIG_GROUP = 2, 32
_CONFIG_CLUSTER_TYPES = frozenset({4, 8, 16})


async def describe_configs(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    """Kafka's ConfigHelper: a resource type it does not know refuses the whole request
    before anything is authorized (the handler's INVALID_REQUEST for every resource);
    otherwise each resource needs DESCRIBE_CONFIGS on its topic, group or the cluster, and
    the refused ones are answered after the allowed ones, with Kafka's messages."""
    known = _CONFIG_CLUSTER_TYPES | {_CONFIG_TOPIC, _CONFIG_GROUP}
    response = _entity(await handler(ctx, req))
    if any(r.resource_type not in known for r in req.resources):
        return response
    allowed, refused = [], []
    for r in response.results:
        if r.resource_type == _CONFIG_TOPIC:
            ok = a.allowed(Operation.DESCRIBE_CONFIGS, TOPIC, r.resource_name)
            code, message = TOPIC_AUTHORIZATION_FAILED, "Topic authorization failed."
        elif r.resource_type == _CONFIG_GROUP:
            ok = a.allowed(Operation.DESCRIBE_CONFIGS, GROUP, r.resource_name)
            code, message = GROUP_AUTHORIZATION_FAILED, "Group authorization failed."
        else:
            ok = a.cluster(Operation.DESCRIBE_CONFIGS)
            code, message = CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."
        if ok:
            allowed.append(r)
        else:
            refused.append(_replace(r, error_code=code, error_message=message, configs=()))
    return _replace(response, results=(*allowed, *refused))


def cluster_op(op: Operation) -> Rule:
    """A rule for an API that needs ``op`` on the cluster (top-level error code)."""

    async def rule(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
        if a.cluster(op):
            return await handler(ctx, req)
        return ctx.respond(
            error_code=CLUSTER_AUTHORIZATION_FAILED,
            error_message="Cluster authorization failed.",
            throttle_time=0,
            results=[],
            resources=[],
        )

    return rule


async def acl_change(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    """CreateAcls / DeleteAcls: ALTER on the cluster, answered per creation / filter."""
    if a.cluster(Operation.ALTER):
        return await handler(ctx, req)
    entry = {
        "error_code": CLUSTER_AUTHORIZATION_FAILED,
        "error_message": "Cluster authorization failed.",
        "matching_acls": [],
    }
    if ctx.api_key == 30:
        return ctx.respond(results=[entry for _ in req.creations], throttle_time=0)
    return ctx.respond(filter_results=[entry for _ in req.filters], throttle_time=0)


async def allowed_to_all(a: Access, ctx: RequestContext, req: Any, handler: Handler) -> Any:
    return await handler(ctx, req)


RULES: dict[int, Rule] = {
    0: produce,
    1: fetch,
    2: list_offsets,
    3: metadata,
    8: offset_commit,
    9: offset_fetch,
    10: find_coordinator,
    11: group_member,
    12: group_member,
    13: group_member,
    14: group_member,
    15: describe_groups,
    16: list_groups,
    19: create_topics,
    20: delete_topics,
    21: delete_records,
    22: init_producer_id,
    24: add_partitions_to_txn,
    25: add_offsets_to_txn,
    26: end_txn,
    27: write_txn_markers,
    28: txn_offset_commit,
    29: cluster_op(DESCRIBE),  # DescribeAcls
    30: acl_change,  # CreateAcls
    31: acl_change,  # DeleteAcls
    32: describe_configs,
    42: delete_groups,
    57: cluster_op(Operation.ALTER),  # UpdateFeatures
    60: allowed_to_all,  # DescribeCluster: Kafka checks nothing
    61: describe_producers,
    62: cluster_op(Operation.CLUSTER_ACTION),  # BrokerRegistration
    63: cluster_op(Operation.CLUSTER_ACTION),  # BrokerHeartbeat
    65: describe_transactions,
    66: list_transactions,
    67: cluster_op(Operation.CLUSTER_ACTION),  # AllocateProducerIds
}
"""The rule of every API a node serves after authentication (ApiVersions and the
SASL APIs are answered before it); an API missing here is served to super users only."""
