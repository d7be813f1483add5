"""The authorizer's ACL semantics (Kafka's StandardAuthorizer), the SASL mechanisms'
server and client sides, the access-control settings, and the per-API rules that
refuse before a handler runs."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import encode_response, request_class
from txnchaos.cluster.security.acl import (
    AclBinding,
    AclFilter,
    InvalidAcl,
    Operation,
    PatternType,
    Permission,
    ResourceType,
)
from txnchaos.cluster.security.authorizer import Authorizer, parse_super_users
from txnchaos.cluster.security.rules import RULES, Access
from txnchaos.cluster.security.sasl import (
    PLAIN,
    SCRAM_SHA_256,
    SCRAM_SHA_512,
    AuthenticationFailed,
    JaasConfig,
    SaslCredentials,
    ServerMechanisms,
)
from txnchaos.cluster.server.dispatch import RequestContext
from txnchaos.cluster.settings import NodeSettings, SettingsError

TOPIC, GROUP, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.TRANSACTIONAL_ID
READ, WRITE, DESCRIBE = Operation.READ, Operation.WRITE, Operation.DESCRIBE
ALICE = "User:alice"


def acl(
    name: str,
    op: Operation,
    perm: Permission = Permission.ALLOW,
    rtype: ResourceType = TOPIC,
    pattern: PatternType = PatternType.LITERAL,
    principal: str = ALICE,
    host: str = "*",
) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, host, op, perm)


def allowed(authorizer: Authorizer, op: Operation, name: str, rtype: ResourceType = TOPIC) -> bool:
    return authorizer.authorize(ALICE, "127.0.0.1", op, rtype, name)


# -- the authorizer ---------------------------------------------------------------------
def test_a_literal_allow_grants_its_operation_only_on_its_resource() -> None:
    a = Authorizer(acls=[acl("orders", WRITE)])
    assert allowed(a, WRITE, "orders")
    assert not allowed(a, READ, "orders")
    assert not allowed(a, WRITE, "orders2")
    assert not a.authorize("User:bob", "127.0.0.1", WRITE, TOPIC, "orders")


def test_deny_overrides_allow_whatever_the_pattern() -> None:
    a = Authorizer(
        acls=[
            acl("*", Operation.ALL),
            acl("ord", WRITE, Permission.DENY, pattern=PatternType.PREFIXED),
        ]
    )
    assert allowed(a, READ, "orders")
    assert not allowed(a, WRITE, "orders")
    assert allowed(a, WRITE, "payments")


def test_wildcard_and_prefixed_patterns_and_wildcard_principal() -> None:
    a = Authorizer(
        acls=[
            acl("tx-", WRITE, rtype=TXN, pattern=PatternType.PREFIXED),
            acl("*", READ, rtype=GROUP, principal="User:*"),
        ]
    )
    assert allowed(a, WRITE, "tx-1", TXN)
    assert not allowed(a, WRITE, "tx", TXN)
    assert allowed(a, READ, "any-group", GROUP)
    assert a.authorize("User:bob", "10.0.0.1", READ, GROUP, "g")


def test_describe_is_implied_by_read_write_delete_alter_but_not_by_a_deny() -> None:
    for op in (READ, WRITE, Operation.DELETE, Operation.ALTER):
        assert allowed(Authorizer(acls=[acl("t", op)]), DESCRIBE, "t")
    assert not allowed(Authorizer(acls=[acl("t", Operation.CREATE)]), DESCRIBE, "t")
    a = Authorizer(acls=[acl("t", WRITE), acl("t", READ, Permission.DENY)])
    assert allowed(a, DESCRIBE, "t")  # denying READ does not deny DESCRIBE
    assert not allowed(Authorizer(acls=[acl("t", Operation.ALL, Permission.DENY)]), DESCRIBE, "t")


def test_two_phase_commit_is_its_own_operation() -> None:
    a = Authorizer(acls=[acl("tx", WRITE, rtype=TXN)])
    assert not allowed(a, Operation.TWO_PHASE_COMMIT, "tx", TXN)
    a.replace([*a.acls(), acl("tx", Operation.TWO_PHASE_COMMIT, rtype=TXN)])
    assert allowed(a, Operation.TWO_PHASE_COMMIT, "tx", TXN)


def test_hosts_must_match() -> None:
    a = Authorizer(acls=[acl("t", READ, host="10.0.0.9")])
    assert not allowed(a, READ, "t")
    assert a.authorize(ALICE, "10.0.0.9", READ, TOPIC, "t")


def test_super_users_and_allow_everyone_if_no_acl_found() -> None:
    a = Authorizer(
        parse_super_users(" User:admin ; User:node;"),
        acls=[acl("t", Operation.ALL, Permission.DENY)],
    )
    assert a.authorize("User:admin", "h", WRITE, TOPIC, "t")
    assert not allowed(a, WRITE, "t")
    assert not allowed(a, WRITE, "other")  # no ACL: denied by default
    open_ = Authorizer(allow_if_no_acl=True, acls=[acl("t", READ, principal="User:bob")])
    assert allowed(open_, WRITE, "other")
    assert not allowed(open_, READ, "t")  # the resource has ACLs, none for alice


def test_allows_some_topic_for_idempotent_producers() -> None:
    a = Authorizer(acls=[acl("p-", WRITE, pattern=PatternType.PREFIXED)])
    assert a.allows_some(ALICE, "h", WRITE, TOPIC)
    assert not a.allows_some("User:bob", "h", WRITE, TOPIC)
    a.replace([*a.acls(), acl("*", WRITE, Permission.DENY)])
    assert not a.allows_some(ALICE, "h", WRITE, TOPIC)


names = st.sampled_from(["a", "ab", "abc", "b", "*"])
bindings = st.builds(
    acl,
    names,
    st.sampled_from([READ, WRITE, DESCRIBE, Operation.ALL]),
    st.sampled_from([Permission.ALLOW, Permission.DENY]),
    st.sampled_from([TOPIC, GROUP]),
    st.sampled_from([PatternType.LITERAL, PatternType.PREFIXED]),
    st.sampled_from([ALICE, "User:*", "User:bob"]),
)


@given(st.lists(bindings, max_size=8), names, st.sampled_from([READ, WRITE, DESCRIBE]))
def test_a_matching_deny_always_wins_and_super_users_always_pass(
    acls: list[AclBinding], name: str, op: Operation
) -> None:
    a = Authorizer(["User:root"], acls=[*acls, acl(name, op, Permission.DENY)])
    assert not allowed(a, op, name)
    assert a.authorize("User:root", "h", op, TOPIC, name)
    b = Authorizer(
        acls=[*acls, acl("", Operation.ALL, Permission.DENY, pattern=PatternType.PREFIXED)]
    )
    assert not allowed(b, op, name)


def test_filters_select_like_describe_and_delete_acls() -> None:
    lit, pre = acl("orders", READ), acl("ord", WRITE, pattern=PatternType.PREFIXED)
    other = acl("g", READ, rtype=GROUP, principal="User:bob")
    a = Authorizer(acls=[lit, pre, other])
    assert a.matching(AclFilter()) == sorted([lit, pre, other], key=AclBinding.to_json)
    assert a.matching(
        AclFilter(resource_type=TOPIC, pattern_type=PatternType.MATCH, resource_name="orders")
    ) == sorted([lit, pre], key=AclBinding.to_json)
    assert a.matching(AclFilter(pattern_type=PatternType.LITERAL, resource_name="ord")) == []
    assert a.matching(AclFilter(principal="User:bob")) == [other]
    assert a.matching(AclFilter(operation=WRITE, permission=Permission.ALLOW)) == [pre]


def test_bindings_that_cannot_be_stored_are_refused() -> None:
    with pytest.raises(InvalidAcl):
        AclBinding.of(2, "t", PatternType.MATCH, ALICE, "*", 3, 3)  # a filter pattern
    with pytest.raises(InvalidAcl):
        AclBinding.of(2, "t", 3, "alice", "*", 3, 3)  # no principal type
    with pytest.raises(InvalidAcl):
        AclBinding.of(4, "not-the-cluster", 3, ALICE, "*", 9, 3)
    with pytest.raises(InvalidAcl):
        AclBinding.of(2, "t", 3, ALICE, "*", 99, 3)  # unknown operation
    b = AclBinding.of(5, "tx", 4, ALICE, "", 15, 3)
    assert b.host == "*" and AclBinding.from_json(b.to_json()) == b


# -- SASL -------------------------------------------------------------------------------
USERS = {"alice": "alice-pw", "node": "node-pw"}


@pytest.mark.parametrize("mechanism", [PLAIN, SCRAM_SHA_256, SCRAM_SHA_512])
def test_each_mechanism_authenticates_our_node_client_and_refuses_a_wrong_password(
    mechanism: str,
) -> None:
    server = ServerMechanisms((PLAIN, SCRAM_SHA_256, SCRAM_SHA_512), USERS)
    for password, ok in (("alice-pw", True), ("wrong", False)):
        exchange = server.start(mechanism)
        client = SaslCredentials(mechanism, "alice", password).exchange()
        token: bytes | None = client.first()
        try:
            while token is not None and exchange.principal is None:
                token = client.answer(exchange.step(token))
        except AuthenticationFailed:
            assert not ok
            assert exchange.principal is None
            continue
        assert ok and exchange.principal == "User:alice"


def test_plain_refuses_malformed_tokens_and_other_authorization_ids() -> None:
    server = ServerMechanisms((PLAIN,), USERS)
    for token in (b"alice\0alice-pw", b"bob\0alice\0alice-pw", b"\0nobody\0x", b"\0alice\0"):
        with pytest.raises(AuthenticationFailed):
            server.start(PLAIN).step(token)


def test_jaas_lines_give_the_node_credentials_and_users() -> None:
    jaas = JaasConfig.parse(
        'org.apache.kafka.common.security.plain.PlainLoginModule required\n username="node" '
        'password="n-pw" user_node="n-pw" user_alice="a\\"pw";'
    )
    assert (jaas.username, jaas.password) == ("node", "n-pw")
    assert jaas.users == {"node": "n-pw", "alice": 'a"pw'}


JAAS = 'x required username="node" password="n" user_node="n" user_alice="a";'


def test_security_is_off_by_default_and_the_node_user_is_a_super_user() -> None:
    assert not NodeSettings().security.active
    on = NodeSettings(
        {
            "listener.security.protocol": "SASL_PLAINTEXT",
            "sasl.jaas.config": JAAS,
            "authorizer.class.name": "StandardAuthorizer",
            "super.users": "User:admin",
        }
    ).security
    assert on.sasl and on.authorizer
    assert on.super_users == {"User:admin", "User:node"}
    assert on.inter_node == SaslCredentials(PLAIN, "node", "n")


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"listener.security.protocol": "SSL"}, "PLAINTEXT, SASL_PLAINTEXT"),
        ({"authorizer.class.name": "StandardAuthorizer"}, "needs listener.security.protocol"),
        ({"authorizer.class.name": "com.example.Mine"}, "is not one of"),
        ({"listener.security.protocol": "SASL_PLAINTEXT"}, "needs users"),
        (
            {
                "listener.security.protocol": "SASL_PLAINTEXT",
                "sasl.jaas.config": 'x required user_a="b";',
            },
            "own credentials",
        ),
        (
            {
                "listener.security.protocol": "SASL_PLAINTEXT",
                "sasl.jaas.config": JAAS,
                "sasl.enabled.mechanisms": "GSSAPI",
            },
            "not supported",
        ),
        (
            {
                "listener.security.protocol": "SASL_PLAINTEXT",
                "sasl.jaas.config": JAAS,
                "sasl.enabled.mechanisms": "SCRAM-SHA-256",
            },
            "inter.broker",
        ),
    ],
)
def test_bad_security_settings_are_clear_errors(settings: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message):
        NodeSettings(settings)


def test_a_jaas_file_with_a_kafka_server_section(tmp_path: Any) -> None:
    path = tmp_path / "jaas.conf"
    path.write_text(f"KafkaServer {{\n  {JAAS}\n}};\nClient {{ x required; }};\n")
    settings = NodeSettings(
        {
            "listener.security.protocol": "SASL_PLAINTEXT",
            "txnchaos.sasl.jaas.config.file": str(path),
        }
    )
    assert settings.security.users == {"node": "n", "alice": "a"}


# -- rules ------------------------------------------------------------------------------
def _ctx(api_key: int, version: int) -> RequestContext:
    return RequestContext(api_key, version, 1, "c", "127.0.0.1:5", 1)


def _run(
    api_key: int,
    version: int,
    request: Any,
    acls: list[AclBinding],
    names: dict[uuid.UUID, str] | None = None,
) -> tuple[Any, list[Any]]:
    """The rule's answer and the requests that reached the handler (``names``: the topic
    ids the node knows)."""
    seen: list[Any] = []
    by_id = version >= 13

    async def handler(ctx: RequestContext, req: Any) -> Any:
        seen.append(req)
        return ctx.respond(
            responses=[
                {
                    **({"topic_id": t.topic_id} if by_id else {"name": t.name}),
                    "partition_responses": [{"index": p.index} for p in t.partition_data],
                }
                for t in req.topic_data
            ]
        )

    known = names or {}
    access = Access(Authorizer(acls=acls), ALICE, "127.0.0.1", known.get)
    answer = asyncio.run(RULES[api_key](access, _ctx(api_key, version), request, handler))
    return answer, seen


def _produce(tid: str | None, topics: list[str]) -> Any:
    return make(
        request_class(0, 9),
        transactional_id=tid,
        acks=-1,
        timeout=1000,
        topic_data=[{"name": t, "partition_data": [{"index": 0, "records": b"x"}]} for t in topics],
    )


def _codes(answer: Any) -> dict[str, int]:
    return {t.name: int(p.error_code) for t in answer.responses for p in t.partition_responses}


def test_produce_refuses_unauthorized_topics_and_passes_only_the_rest() -> None:
    answer, seen = _run(0, 9, _produce(None, ["ok", "no"]), [acl("ok", WRITE)])
    assert _codes(answer) == {"ok": 0, "no": 29}
    assert [t.name for t in seen[0].topic_data] == ["ok"]
    encode_response(1, answer)


def test_produce_v13_authorizes_topics_named_by_id() -> None:
    """Produce v13 names topics by id: the rule authorizes the id's topic name; an id the
    node does not know goes on to the handler (UNKNOWN_TOPIC_ID there, as Kafka)."""
    ok, no, unknown = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    request = make(
        request_class(0, 13),
        transactional_id=None,
        acks=-1,
        timeout=1000,
        topic_data=[
            {"topic_id": i, "partition_data": [{"index": 0, "records": b"x"}]}
            for i in (ok, no, unknown)
        ],
    )
    answer, seen = _run(0, 13, request, [acl("ok", WRITE)], {ok: "ok", no: "no"})
    codes = {t.topic_id: int(p.error_code) for t in answer.responses for p in t.partition_responses}
    assert codes == {ok: 0, no: 29, unknown: 0}
    assert [t.topic_id for t in seen[0].topic_data] == [ok, unknown]
    encode_response(1, answer)


def test_produce_without_the_transactional_id_reaches_no_handler() -> None:
    answer, seen = _run(0, 9, _produce("tx", ["ok"]), [acl("ok", WRITE)])
    assert _codes(answer) == {"ok": 53} and seen == []
    answer, seen = _run(
        0, 9, _produce("tx", ["ok"]), [acl("ok", WRITE), acl("tx", WRITE, rtype=TXN)]
    )
    assert _codes(answer) == {"ok": 0} and len(seen) == 1


def test_init_producer_id_with_2pc_needs_two_phase_commit() -> None:
    request = make(
        request_class(22, 6),
        transactional_id="tx",
        transaction_timeout=1000,
        producer_id=-1,
        producer_epoch=-1,
        enable2_pc=True,
        keep_prepared_txn=False,
    )
    answer, seen = _run(22, 6, request, [acl("tx", WRITE, rtype=TXN)])
    assert int(answer.error_code) == 53 and seen == []


def _describe_configs(resources: list[tuple[int, str]], acls: list[AclBinding]) -> Any:
    """The DescribeConfigs rule's answer, the handler answering every resource with no
    error (unknown types INVALID_REQUEST, as the node's handler)."""

    async def handler(ctx: RequestContext, req: Any) -> Any:
        bad = any(r.resource_type not in (2, 4, 8, 16, 32) for r in req.resources)
        return ctx.respond(
            throttle_time=0,
            results=[
                {
                    "error_code": 42 if bad else 0,
                    "error_message": "malformed" if bad else "",
                    "resource_type": r.resource_type,
                    "resource_name": r.resource_name,
                    "configs": [],
                }
                for r in req.resources
            ],
        )

    request = make(
        request_class(32, 4),
        resources=[
            {"resource_type": t, "resource_name": n, "configuration_keys": None}
            for t, n in resources
        ],
    )
    access = Access(Authorizer(acls=acls), ALICE, "127.0.0.1", lambda _: None)
    answer = asyncio.run(RULES[32](access, _ctx(32, 4), request, handler))
    encode_response(1, answer)
    return [(int(r.resource_type), r.resource_name, int(r.error_code), r.error_message)
            for r in answer.results]  # fmt: skip


def test_describe_configs_authorizes_as_kafka_and_answers_the_refused_last() -> None:
    """Kafka's ConfigHelper: a topic by its name, a group (config resource 32) by its name,
    a broker on the cluster; the refused resources come after the allowed ones, with
    Kafka's messages."""
    acls = [
        acl("ok", Operation.DESCRIBE_CONFIGS),
        acl("g", Operation.DESCRIBE_CONFIGS, rtype=GROUP),
    ]
    got = _describe_configs([(2, "no"), (4, "1"), (2, "ok"), (32, "g"), (32, "h")], acls)
    assert got == [
        (2, "ok", 0, ""),
        (32, "g", 0, ""),
        (2, "no", 29, "Topic authorization failed."),
        (4, "1", 31, "Cluster authorization failed."),
        (32, "h", 30, "Group authorization failed."),
    ]


def test_describe_configs_of_an_unknown_resource_type_is_refused_before_authorizing() -> None:
    got = _describe_configs([(2, "no"), (3, "x")], [])
    assert got == [(2, "no", 42, "malformed"), (3, "x", 42, "malformed")]


# Every rule, for a principal without any ACL: (api key, version, request, what the
# handler would answer, the error the client must see, whether the handler may run).
TP = [{"name": "t", "partitions": [{"partition_index": 0}]}]
RULE_CASES: list[tuple[int, int, dict[str, Any], dict[str, Any], int, bool]] = [
    (
        1,
        12,
        {"replica_id": -1, "topics": [{"topic": "t", "partitions": [{"partition": 0}]}]},
        {},
        29,
        False,
    ),
    (2, 7, {"topics": [{"name": "t", "partitions": [{"partition_index": 0}]}]}, {}, 29, False),
    (
        3,
        12,
        {"topics": [{"name": "t"}], "allow_auto_topic_creation": True},
        {"topics": []},
        29,
        True,
    ),
    (8, 9, {"group_id": "g", "topics": TP}, {}, 30, False),
    (9, 7, {"group_id": "g", "topics": None}, {}, 30, False),
    (
        9,
        9,
        {"groups": [{"group_id": "g", "topics": None}]},
        {"groups": [{"group_id": "g", "topics": []}]},
        30,
        True,
    ),
    (10, 3, {"key": "g", "key_type": 0}, {}, 30, False),
    (10, 4, {"key_type": 1, "coordinator_keys": ["tx"]}, {}, 53, False),
    (11, 5, {"group_id": "g", "protocol_type": "consumer", "protocols": []}, {}, 30, False),
    (13, 4, {"group_id": "g", "members": []}, {}, 30, False),
    (
        15,
        5,
        {"groups": ["g"]},
        {"groups": [{"group_id": "g", "error_code": 0, "members": []}]},
        30,
        True,
    ),
    (
        19,
        7,
        {"topics": [{"name": "t", "num_partitions": 1, "replication_factor": 1}]},
        {},
        29,
        False,
    ),
    (20, 6, {"topics": [{"name": "t", "topic_id": None}]}, {}, 29, False),
    (
        21,
        2,
        {"topics": [{"name": "t", "partitions": [{"partition_index": 0, "offset": 1}]}]},
        {},
        29,
        False,
    ),
    (22, 4, {"transactional_id": None}, {}, 31, False),
    (
        24,
        3,
        {
            "v3_and_below_transactional_id": "tx",
            "v3_and_below_topics": [{"name": "t", "partitions": [0]}],
        },
        {},
        53,
        False,
    ),
    (24, 4, {"transactions": []}, {}, 31, False),
    (25, 3, {"transactional_id": "tx", "group_id": "g"}, {}, 53, False),
    (26, 4, {"transactional_id": "tx"}, {}, 53, False),
    (
        27,
        1,
        {"markers": [{"producer_id": 1, "topics": [{"name": "t", "partition_indexes": [0]}]}]},
        {},
        31,
        False,
    ),
    (28, 3, {"transactional_id": "tx", "group_id": "g", "topics": TP}, {}, 53, False),
    (29, 3, {}, {}, 31, False),
    (
        30,
        3,
        {"creations": [{"resource_type": 2, "resource_name": "t", "principal": "User:a"}]},
        {},
        31,
        False,
    ),
    (
        32,
        4,
        {"resources": [{"resource_type": 2, "resource_name": "t"}]},
        {"results": [{"resource_type": 2, "resource_name": "t", "error_code": 0, "configs": []}]},
        29,
        True,
    ),
    (42, 2, {"groups_names": ["g"]}, {}, 30, False),
    (57, 1, {"feature_updates": []}, {}, 31, False),
    (
        61,
        0,
        {"topics": [{"name": "t", "partition_indexes": [0]}]},
        {
            "topics": [
                {
                    "name": "t",
                    "partitions": [{"partition_index": 0, "error_code": 0, "active_producers": []}],
                }
            ]
        },
        29,
        True,
    ),
    (63, 0, {"broker_id": 1}, {}, 31, False),
    (
        65,
        0,
        {"transactional_ids": ["tx"]},
        {
            "transaction_states": [
                {
                    "transactional_id": "tx",
                    "error_code": 0,
                    "transaction_state": "Ongoing",
                    "topics": [],
                }
            ]
        },
        53,
        True,
    ),
]


def _error_codes(entity: Any) -> set[int]:
    import dataclasses

    found: set[int] = set()
    if dataclasses.is_dataclass(entity):
        for f in dataclasses.fields(entity):
            value = getattr(entity, f.name)
            if f.name in ("error_code", "partition_error_code"):
                found.add(int(value))
            found |= _error_codes(value)
    elif isinstance(entity, tuple):
        for item in entity:
            found |= _error_codes(item)
    return found


@pytest.mark.parametrize(("api_key", "version", "fields", "answer", "expected", "runs"), RULE_CASES)
def test_every_rule_refuses_with_kafkas_error_in_an_encodable_response(
    api_key: int,
    version: int,
    fields: dict[str, Any],
    answer: dict[str, Any],
    expected: int,
    runs: bool,
) -> None:
    seen: list[Any] = []

    async def handler(ctx: RequestContext, req: Any) -> Any:
        seen.append(req)
        return ctx.respond(answer)

    request = make(request_class(api_key, version), fields)
    no_acl = Authorizer(acls=[acl("other", READ, rtype=GROUP)])  # (no topic WRITE anywhere)
    access = Access(no_acl, ALICE, "127.0.0.1", lambda _: None)
    result = asyncio.run(RULES[api_key](access, _ctx(api_key, version), request, handler))
    assert expected in _error_codes(result)
    assert bool(seen) == runs
    encode_response(1, result)


def test_acl_apis_store_describe_and_delete_durably(tmp_path: Any) -> None:
    from txnchaos.cluster.security.acl_apis import AclApis, AclStore

    store = AclStore(tmp_path / "acls.json")
    apis = AclApis(Authorizer(), store)
    creation = {
        "resource_type": 5,
        "resource_name": "tx-",
        "resource_pattern_type": 4,
        "principal": "User:alice",
        "host": "*",
        "operation": 4,
        "permission_type": 3,
    }
    bad = dict(creation, resource_pattern_type=2)  # MATCH is a filter, not a pattern
    created = asyncio.run(
        apis.create(_ctx(30, 3), make(request_class(30, 3), creations=[creation, bad]))
    )
    assert [int(r.error_code) for r in created.results] == [0, 42]
    assert AclApis(Authorizer(), store).authorizer.authorize(ALICE, "h", WRITE, TXN, "tx-1")

    any_filter = {
        "resource_type_filter": 1,
        "pattern_type_filter": 1,
        "operation": 1,
        "permission_type": 1,
    }
    described = asyncio.run(apis.describe(_ctx(29, 3), make(request_class(29, 3), any_filter)))
    assert [(r.resource_name, len(r.acls)) for r in described.resources] == [("tx-", 1)]
    deleted = asyncio.run(
        apis.delete(
            _ctx(31, 3),
            make(request_class(31, 3), filters=[dict(any_filter, resource_type_filter=5)]),
        )
    )
    assert [m.resource_name for m in deleted.filter_results[0].matching_acls] == ["tx-"]
    assert AclApis(Authorizer(), store).authorizer.acls() == frozenset()


def test_a_plain_node_installs_nothing_and_a_sasl_node_installs_the_layer(tmp_path: Any) -> None:
    from txnchaos.cluster.net.client import PeerConnection, use_sasl_for_peers
    from txnchaos.cluster.node import Node, NodeConfig

    plain = Node(NodeConfig(1, frozenset({"broker", "coordinator"}), tmp_path / "a"))
    assert plain.access is None
    settings = NodeSettings(
        {"listener.security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config": JAAS}
    )
    try:
        secured = Node(NodeConfig(1, frozenset({"coordinator"}), tmp_path / "b", settings=settings))
        assert secured.access is not None and secured.access.authorizer is None
        assert PeerConnection("127.0.0.1", 1, client_id="x").sasl == settings.security.inter_node
    finally:
        use_sasl_for_peers(None)  # the node set its process's peer credentials
    assert PeerConnection("127.0.0.1", 1, client_id="x").sasl is None
