"""What ``txnchaos acls`` adds, lists and removes, in Kafka's terms (``kafka-acls.sh``,
Kafka's ``AclCommand``): resource patterns, access control entries, their names and
codes on the wire, the operations each resource type takes, and their printed form.

Names are Kafka's: operations and permission types in PascalCase (``Read``,
``TwoPhaseCommit``), also accepted in any case with or without underscores, as Kafka's
``SecurityUtils`` looks them up; principals ``Type:name`` (``User:alice``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

from ...cluster.security.acl import CLUSTER_NAME, WILDCARD, Operation, PatternType, ResourceType


class AclInputError(ValueError):
    """A name or a combination of options Kafka's tool refuses too."""


class Permission(IntEnum):
    ANY = 1
    DENY = 2
    ALLOW = 3


def pascal(name: str) -> str:
    """``TWO_PHASE_COMMIT`` -> ``TwoPhaseCommit`` (Kafka's printed names)."""
    return "".join(part.capitalize() for part in name.split("_"))


_OPERATIONS = {
    op.name.replace("_", ""): op for op in Operation if op not in (Operation.UNKNOWN, Operation.ANY)
}
_PATTERN_TYPES = {p.name: p for p in PatternType if p is not PatternType.UNKNOWN}

#: Kafka's AclEntry.supportedOperations (4.x): what each resource type takes (and All).
SUPPORTED: dict[ResourceType, frozenset[Operation]] = {
    ResourceType.TOPIC: frozenset(
        {
            Operation.READ,
            Operation.WRITE,
            Operation.CREATE,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.ALTER,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.GROUP: frozenset(
        {
            Operation.READ,
            Operation.DESCRIBE,
            Operation.DELETE,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
        }
    ),
    ResourceType.CLUSTER: frozenset(
        {
            Operation.CREATE,
            Operation.CLUSTER_ACTION,
            Operation.DESCRIBE_CONFIGS,
            Operation.ALTER_CONFIGS,
            Operation.IDEMPOTENT_WRITE,
            Operation.ALTER,
            Operation.DESCRIBE,
        }
    ),
    ResourceType.TRANSACTIONAL_ID: frozenset(
        {Operation.DESCRIBE, Operation.WRITE, Operation.TWO_PHASE_COMMIT}
    ),
}


def operation(name: str) -> Operation:
    """An operation by Kafka's name (``Read``, ``TwoPhaseCommit``; any case, underscores
    optional)."""
    found = _OPERATIONS.get(name.strip().replace("_", "").upper())
    if found is None:
        names = ", ".join(pascal(op.name) for op in _OPERATIONS.values())
        raise AclInputError(f"unknown operation {name!r} (one of: {names})")
    return found


def pattern_type(name: str) -> PatternType:
    found = _PATTERN_TYPES.get(name.strip().upper())
    if found is None:
        names = ", ".join(p.name.lower() for p in _PATTERN_TYPES.values())
        raise AclInputError(f"unknown resource pattern type {name!r} (one of: {names})")
    return found


def principal(text: str) -> str:
    """``Type:name`` (Kafka's ``SecurityUtils.parseKafkaPrincipal``), as given."""
    kind, sep, name = text.strip().partition(":")
    if not sep or not kind or not name:
        raise AclInputError(
            f"expected a principal in the form principalType:principalName, got {text!r}"
        )
    return f"{kind}:{name}"


@dataclass(frozen=True, order=True)
class Resource:
    """A resource pattern, or (with ANY/MATCH) a pattern filter."""

    resource_type: ResourceType
    name: str
    pattern_type: PatternType

    def __str__(self) -> str:
        return (
            f"ResourcePattern(resourceType={self.resource_type.name}, name={self.name}, "
            f"patternType={self.pattern_type.name})"
        )

    def to_json(self) -> dict[str, str]:
        return {
            "resource_type": self.resource_type.name,
            "name": self.name,
            "pattern_type": self.pattern_type.name,
        }


def cluster_resource() -> Resource:
    return Resource(ResourceType.CLUSTER, CLUSTER_NAME, PatternType.LITERAL)


@dataclass(frozen=True, order=True)
class Entry:
    """An access control entry: who, from where, may (or may not) do what."""

    principal: str
    host: str
    operation: Operation
    permission: Permission

    def __str__(self) -> str:
        return (
            f"(principal={self.principal}, host={self.host}, "
            f"operation={self.operation.name}, permissionType={self.permission.name})"
        )

    def to_json(self) -> dict[str, str]:
        return {
            "principal": self.principal,
            "host": self.host,
            "operation": pascal(self.operation.name),
            "permission_type": pascal(self.permission.name),
        }


def entries(
    principals: list[str], hosts: list[str], operations: list[Operation], permission: Permission
) -> set[Entry]:
    """Every principal x host x operation (no host given: every host, ``*``)."""
    return {
        Entry(p, h, op, permission)
        for p in principals
        for h in (hosts or [WILDCARD])
        for op in operations
    }


def check_operations(resource: Resource, acls: set[Entry]) -> None:
    """Kafka's ``validateOperation``: each resource type takes its own operations."""
    valid = SUPPORTED.get(resource.resource_type, frozenset()) | {Operation.ALL}
    bad = sorted({e.operation for e in acls} - valid)
    if bad:
        names = ", ".join(sorted(pascal(op.name) for op in valid))
        raise AclInputError(
            f"resource type {pascal(resource.resource_type.name)} takes the operations "
            f"{names}; not {', '.join(pascal(op.name) for op in bad)}"
        )


def creation(resource: Resource, entry: Entry) -> dict[str, object]:
    """A CreateAcls creation."""
    return {
        "resource_type": int(resource.resource_type),
        "resource_name": resource.name,
        "resource_pattern_type": int(resource.pattern_type),
        "principal": entry.principal,
        "host": entry.host,
        "operation": int(entry.operation),
        "permission_type": int(entry.permission),
    }


def binding_filter(resource: Resource | None, entry: Entry | None) -> dict[str, object]:
    """A DescribeAcls / DeleteAcls filter (None: any resource, any entry)."""
    return {
        "resource_type_filter": int(
            ResourceType.ANY if resource is None else resource.resource_type
        ),
        "resource_name_filter": None if resource is None else resource.name,
        "pattern_type_filter": int(PatternType.ANY if resource is None else resource.pattern_type),
        "principal_filter": None if entry is None else entry.principal,
        "host_filter": None if entry is None else entry.host,
        "operation": int(Operation.ANY if entry is None else entry.operation),
        "permission_type": int(Permission.ANY if entry is None else entry.permission),
    }


def described(response: object) -> dict[Resource, set[Entry]]:
    """DescribeAcls' answer: resource pattern -> its entries."""
    out: dict[Resource, set[Entry]] = {}
    for r in response.resources:  # type: ignore[attr-defined]
        resource = Resource(
            ResourceType(int(r.resource_type)),
            str(r.resource_name),
            PatternType(int(r.pattern_type)),
        )
        bucket = out.setdefault(resource, set())
        for a in r.acls:
            bucket.add(
                Entry(
                    str(a.principal),
                    str(a.host),
                    Operation(int(a.operation)),
                    Permission(int(a.permission_type)),
                )
            )
    return out


def render(acls: dict[Resource, set[Entry]]) -> str:
    """As Kafka's tool prints a listing."""
    blocks = []
    for resource in sorted(acls):
        lines = "\n".join(f"\t{e}" for e in sorted(acls[resource]))
        blocks.append(f"Current ACLs for resource `{resource}`:\n{lines}\n")
    return "\n".join(blocks)
