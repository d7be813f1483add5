"""ACL bindings and filters with Kafka's codes (resource types, pattern types,
operations, permissions), as CreateAcls / DescribeAcls / DeleteAcls carry them."""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class ResourceType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Operation(IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class Permission(IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


CLUSTER_NAME = "kafka-cluster"
"""The one cluster resource's name (Kafka's ``Resource.CLUSTER_NAME``)."""
WILDCARD = "*"
"""A literal resource name, principal or host matching every name."""


class InvalidAcl(ValueError):
    """A binding CreateAcls must refuse (Kafka: INVALID_REQUEST / unknown codes)."""


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: who (principal, host) may or may not do what (operation) on which
    resources (type, name, pattern type)."""

    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: Operation
    permission: Permission

    @classmethod
    def of(
        cls,
        resource_type: int,
        resource_name: str,
        pattern_type: int,
        principal: str,
        host: str,
        operation: int,
        permission: int,
    ) -> AclBinding:
        """A binding from wire codes, refusing what CreateAcls cannot store."""
        try:
            rtype, ptype = ResourceType(resource_type), PatternType(pattern_type)
            op, perm = Operation(operation), Permission(permission)
        except ValueError as exc:
            raise InvalidAcl(str(exc)) from None
        if rtype in (ResourceType.UNKNOWN, ResourceType.ANY):
            raise InvalidAcl(f"resource type {rtype.name} is not a resource")
        if ptype not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise InvalidAcl(f"pattern type {ptype.name} is a filter, not a pattern")
        if op in (Operation.UNKNOWN, Operation.ANY):
            raise InvalidAcl(f"operation {op.name} is a filter, not an operation")
        if perm not in (Permission.ALLOW, Permission.DENY):
            raise InvalidAcl(f"permission {perm.name} is a filter, not a permission")
        if not resource_name:
            raise InvalidAcl("resource name must not be empty")
        if ":" not in principal:
            raise InvalidAcl(f"principal {principal!r} is not TYPE:NAME (e.g. User:alice)")
        if rtype is ResourceType.CLUSTER and resource_name != CLUSTER_NAME:
            raise InvalidAcl(f"the cluster resource is named {CLUSTER_NAME!r}")
        return cls(rtype, resource_name, ptype, principal, host or WILDCARD, op, perm)

    def to_json(self) -> list[int | str]:
        return [
            int(self.resource_type),
            self.resource_name,
            int(self.pattern_type),
            self.principal,
            self.host,
            int(self.operation),
            int(self.permission),
        ]

    @classmethod
    def from_json(cls, row: list[int | str]) -> AclBinding:
        rt, name, pt, principal, host, op, perm = row
        return cls.of(int(rt), str(name), int(pt), str(principal), str(host), int(op), int(perm))


@dataclass(frozen=True, slots=True)
class AclFilter:
    """What DescribeAcls and DeleteAcls select: ANY / None fields match everything;
    pattern type MATCH selects the bindings that would apply to the named resource."""

    resource_type: int = ResourceType.ANY
    resource_name: str | None = None
    pattern_type: int = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: int = Operation.ANY
    permission: int = Permission.ANY

    def matches(self, b: AclBinding) -> bool:
        if self.resource_type != ResourceType.ANY and self.resource_type != b.resource_type:
            return False
        if not self._resource_matches(b):
            return False
        if self.principal is not None and self.principal != b.principal:
            return False
        if self.host is not None and self.host != b.host:
            return False
        if self.operation != Operation.ANY and self.operation != b.operation:
            return False
        return self.permission == Permission.ANY or self.permission == b.permission

    def _resource_matches(self, b: AclBinding) -> bool:
        ptype, name = self.pattern_type, self.resource_name
        if ptype == PatternType.MATCH:
            if name is None:
                return True
            if b.pattern_type == PatternType.PREFIXED:
                return name.startswith(b.resource_name)
            return b.resource_name in (name, WILDCARD)
        if ptype != PatternType.ANY and ptype != b.pattern_type:
            return False
        return name is None or name == b.resource_name
