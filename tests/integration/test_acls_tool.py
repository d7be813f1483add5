"""``txnchaos acls`` (Kafka's kafka-acls.sh) against our cluster with SASL and an
authorizer: add (TwoPhaseCommit included, --producer roles, prefixed patterns), list (all,
by resource, by principal), remove, and the refusals Kafka's tool makes; an added ACL
grants what it says (KIP-939's TWO_PHASE_COMMIT lets alice's InitProducerId enable 2PC).
The same tool against Apache Kafka with StandardAuthorizer: test_conformance_fixes.py."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from txnchaos.cluster.security.sasl import SaslCredentials
from txnchaos.harness.cli import main
from txnchaos.harness.launch.local import LocalCluster

from ..conftest import start_cluster
from .raw_client import RawClient, address

pytestmark = pytest.mark.integration

PASSWORDS = {"node": "node-pw", "admin": "admin-pw", "alice": "alice-pw"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + " ".join(
    ['username="node" password="node-pw"', *(f'user_{u}="{p}"' for u, p in PASSWORDS.items())]
)
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
SECURITY_DISABLED = 54


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    c = start_cluster(
        tmp_path_factory.mktemp("acls-tool"),
        brokers=1,
        settings=[
            "listener.security.protocol=SASL_PLAINTEXT",
            "sasl.enabled.mechanisms=PLAIN",
            f"sasl.jaas.config={JAAS};",
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users=User:admin",
            "transaction.two.phase.commit.enable=true",
        ],
    )
    yield c
    c.down()


@pytest.fixture(scope="module")
def admin_config(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("acls-config") / "admin.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=admin\nsasl.password=admin-pw\n"
    )
    return path


def acls(cluster: LocalCluster, config: Path, *args: str, code: int = 0) -> str:
    bootstrap = str(cluster.state()["bootstrap"])
    result = CliRunner().invoke(
        main, ["acls", "--bootstrap-server", bootstrap, "--command-config", str(config), *args]
    )
    assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr)
    return result.stdout if code == 0 else result.stderr


def listed(cluster: LocalCluster, config: Path, *args: str) -> dict[tuple[str, str], set[Any]]:
    """(resource type, name) -> {(principal, operation, permission)}."""
    out = json.loads(acls(cluster, config, "--list", "--json", *args))
    return {
        (a["resource_type"], a["name"]): {
            (e["principal"], e["operation"], e["permission_type"]) for e in a["entries"]
        }
        for a in out["acls"]
    }


def alice_enables_2pc(cluster: LocalCluster) -> int:
    """InitProducerId v6 with Enable2Pc for alice-2pc, as alice (KIP-939)."""
    client = RawClient(
        *address(str(cluster.state()["bootstrap"])),
        sasl=SaslCredentials("PLAIN", "alice", PASSWORDS["alice"]),
    )
    try:
        r = client.request(
            22,
            6,
            transactional_id="alice-2pc",
            transaction_timeout=60_000,
            producer_id=-1,
            producer_epoch=-1,
            enable2_pc=True,
            keep_prepared_txn=False,
        )
    finally:
        client.close()
    return int(r.error_code)


def test_add_list_remove(cluster: LocalCluster, admin_config: Path) -> None:
    assert alice_enables_2pc(cluster) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    out = acls(
        cluster, admin_config, "--add", "--allow-principal", "User:alice",
        "--operation", "TwoPhaseCommit", "--operation", "Write",
        "--transactional-id", "alice-2pc",
    )  # fmt: skip
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TRANSACTIONAL_ID" in out
    assert "operation=TWO_PHASE_COMMIT, permissionType=ALLOW" in out
    assert alice_enables_2pc(cluster) == 0  # the ACL grants what it says
    again = acls(
        cluster, admin_config, "--add", "--allow-principal", "User:alice",
        "--operation", "write", "--transactional-id", "alice-2pc",
    )  # fmt: skip
    assert "already exists" in again
    acls(
        cluster, admin_config, "--add", "--producer", "--idempotent", "--topic", "orders",
        "--allow-principal", "User:alice",
    )  # fmt: skip
    acls(
        cluster, admin_config, "--add", "--resource-pattern-type", "prefixed", "--group", "g-",
        "--deny-principal", "User:alice", "--operation", "Read",
    )  # fmt: skip
    everything = listed(cluster, admin_config)
    assert everything[("TRANSACTIONAL_ID", "alice-2pc")] == {
        ("User:alice", "TwoPhaseCommit", "Allow"),
        ("User:alice", "Write", "Allow"),
    }
    assert everything[("TOPIC", "orders")] == {
        ("User:alice", op, "Allow") for op in ("Write", "Describe", "Create")
    }
    assert everything[("CLUSTER", "kafka-cluster")] == {("User:alice", "IdempotentWrite", "Allow")}
    assert everything[("GROUP", "g-")] == {("User:alice", "Read", "Deny")}
    # by resource (a literal filter does not match the prefixed pattern), by principal
    assert set(listed(cluster, admin_config, "--topic", "orders")) == {("TOPIC", "orders")}
    assert listed(cluster, admin_config, "--group", "g-") == {}
    assert set(listed(cluster, admin_config, "--resource-pattern-type", "any", "--group", "g-"))
    assert set(listed(cluster, admin_config, "--principal", "User:bob")) == set()
    # remove one entry, then a whole resource
    acls(
        cluster, admin_config, "--remove", "--force", "--allow-principal", "User:alice",
        "--operation", "TwoPhaseCommit", "--transactional-id", "alice-2pc",
    )  # fmt: skip
    assert alice_enables_2pc(cluster) == TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    acls(cluster, admin_config, "--remove", "--force", "--topic", "orders", "--cluster")
    left = listed(cluster, admin_config)
    assert ("TOPIC", "orders") not in left and ("CLUSTER", "kafka-cluster") not in left
    assert left[("TRANSACTIONAL_ID", "alice-2pc")] == {("User:alice", "Write", "Allow")}


A = ["--allow-principal", "User:a"]
BAD_INPUT = [
    (["--list", "--add"], "exactly one action"),
    (["--add", "--topic", "t", "--operation", "Read"], "--allow-principal or --deny"),
    (["--add", "--topic", "t", "--allow-principal", "alice"], "principalType:principalName"),
    (["--add", "--topic", "t", *A, "--operation", "Fly"], "Fly"),
    (["--add", "--topic", "t", *A, "--operation", "TwoPhaseCommit"], "not TwoPhaseCommit"),
    (["--add", "--resource-pattern-type", "any", "--topic", "t", *A], "not valid when adding"),
    (["--list", "--resource-pattern-type", "odd"], "pattern type 'odd'"),
    (["--add", "--producer", *A], "--topic"),
    (["--remove", "--principal", "User:a", "--topic", "t"], "only available with --list"),
]


@pytest.mark.parametrize(("args", "named"), BAD_INPUT)
def test_bad_input_is_refused_with_exit_code_2(
    cluster: LocalCluster, admin_config: Path, args: list[str], named: str
) -> None:
    assert named in acls(cluster, admin_config, *args, code=2)


def test_a_user_without_alter_on_the_cluster_is_refused(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    config = tmp_path / "alice.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
        "sasl.username=alice\nsasl.password=alice-pw\n"
    )
    err = acls(cluster, config, "--add", "--topic", "t", "--allow-principal", "User:alice", code=2)
    assert "CLUSTER_AUTHORIZATION_FAILED" in err


def test_without_an_authorizer_the_acl_apis_say_security_disabled(bootstrap: str) -> None:
    """As Kafka's AclApis (Kafka 4.4.0 without an authorizer answers the tool's --list the
    same way): served, refused with SECURITY_DISABLED and Kafka's messages."""
    result = CliRunner().invoke(main, ["acls", "--bootstrap-server", bootstrap, "--list"])
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        "txnchaos acls: DescribeAcls refused: SECURITY_DISABLED "
        "(No Authorizer is configured on the broker)"
    )
    client = RawClient(*address(bootstrap))
    try:
        versions = client.request(18, 3, client_software_name="t", client_software_version="1")
        served = {int(k.api_key): (k.min_version, k.max_version) for k in versions.api_keys}
        assert {k: served.get(k) for k in (29, 30, 31)} == dict.fromkeys((29, 30, 31), (1, 3))
        binding = {
            "resource_type": 2,
            "resource_name": "t",
            "resource_pattern_type": 3,
            "principal": "User:a",
            "host": "*",
            "operation": 3,
            "permission_type": 3,
        }
        created = client.request(30, 3, creations=[binding, binding])
        assert [(r.error_code, r.error_message) for r in created.results] == [
            (SECURITY_DISABLED, "No Authorizer is configured.")
        ] * 2
        deleted = client.request(
            31,
            3,
            filters=[
                {
                    "resource_type_filter": 1,
                    "resource_name_filter": None,
                    "pattern_type_filter": 1,
                    "principal_filter": None,
                    "host_filter": None,
                    "operation": 1,
                    "permission_type": 1,
                }
            ],
        )
        assert [r.error_code for r in deleted.filter_results] == [SECURITY_DISABLED]
    finally:
        client.close()
