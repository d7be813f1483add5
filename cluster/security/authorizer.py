"""Kafka's ACL authorizer semantics (StandardAuthorizer): super users may do anything;
otherwise a DENY that matches wins over any ALLOW; an ALLOW of the operation (or of
ALL, or of an operation that implies it) permits; a resource with no ACL at all is
allowed only under ``allow.everyone.if.no.acl.found``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from .acl import WILDCARD, AclBinding, AclFilter, Operation, PatternType, Permission, ResourceType

IMPLIED_BY: dict[Operation, frozenset[Operation]] = {
    Operation.DESCRIBE: frozenset(
        {Operation.DESCRIBE, Operation.READ, Operation.WRITE, Operation.DELETE, Operation.ALTER}
    ),
    Operation.DESCRIBE_CONFIGS: frozenset({Operation.DESCRIBE_CONFIGS, Operation.ALTER_CONFIGS}),
}
"""ALLOW ACLs that grant an operation besides its own (and ALL), as in Kafka."""

WILDCARD_PRINCIPAL = "User:*"


def parse_super_users(value: str) -> frozenset[str]:
    """``super.users``: principals separated by semicolons (``User:a;User:b``)."""
    return frozenset(p.strip() for p in value.split(";") if p.strip())


class Authorizer:
    def __init__(
        self,
        super_users: Iterable[str] = (),
        allow_if_no_acl: bool = False,
        acls: Iterable[AclBinding] = (),
    ) -> None:
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._acls: set[AclBinding] = set()
        self._literal: dict[tuple[ResourceType, str], list[AclBinding]] = defaultdict(list)
        self._prefixed: dict[ResourceType, list[AclBinding]] = defaultdict(list)
        self.replace(acls)

    # -- the ACL set -------------------------------------------------------------------
    def replace(self, acls: Iterable[AclBinding]) -> None:
        """Install a new ACL set (e.g. the controller's, as pulled)."""
        self._acls = set(acls)
        self._literal.clear()
        self._prefixed.clear()
        for b in self._acls:
            if b.pattern_type is PatternType.PREFIXED:
                self._prefixed[b.resource_type].append(b)
            else:
                self._literal[(b.resource_type, b.resource_name)].append(b)

    def acls(self) -> frozenset[AclBinding]:
        return frozenset(self._acls)

    def matching(self, flt: AclFilter) -> list[AclBinding]:
        return sorted((b for b in self._acls if flt.matches(b)), key=AclBinding.to_json)

    # -- decisions ---------------------------------------------------------------------
    def is_super(self, principal: str) -> bool:
        return principal in self.super_users

    def _resource_acls(self, rtype: ResourceType, name: str) -> list[AclBinding]:
        found = list(self._literal.get((rtype, name), ()))
        if name != WILDCARD:
            found.extend(self._literal.get((rtype, WILDCARD), ()))
        found.extend(b for b in self._prefixed.get(rtype, ()) if name.startswith(b.resource_name))
        return found

    def authorize(
        self, principal: str, host: str, operation: Operation, rtype: ResourceType, name: str
    ) -> bool:
        if principal in self.super_users:
            return True
        acls = self._resource_acls(rtype, name)
        if not acls:
            return self.allow_if_no_acl
        allowed_by = IMPLIED_BY.get(operation, frozenset((operation,)))
        allowed = False
        for b in acls:
            if b.principal != principal and b.principal != WILDCARD_PRINCIPAL:
                continue
            if b.host != host and b.host != WILDCARD:
                continue
            if b.permission is Permission.DENY:
                if b.operation is operation or b.operation is Operation.ALL:
                    return False
            elif b.operation is Operation.ALL or b.operation in allowed_by:
                allowed = True
        return allowed

    def allows_some(
        self, principal: str, host: str, operation: Operation, rtype: ResourceType
    ) -> bool:
        """Kafka's authorizeByResourceType: some resource of the type allows ``operation``
        (and no DENY on every resource of the type, the literal ``*``, says otherwise)."""
        if principal in self.super_users:
            return True
        acls = [
            b
            for b in self._acls
            if b.resource_type is rtype
            and b.principal in (principal, WILDCARD_PRINCIPAL)
            and b.host in (host, WILDCARD)
            and b.operation in (operation, Operation.ALL)
        ]
        if not any(b.resource_type is rtype for b in self._acls):
            return self.allow_if_no_acl
        if any(
            b.permission is Permission.DENY
            and b.pattern_type is PatternType.LITERAL
            and b.resource_name == WILDCARD
            for b in acls
        ):
            return False
        return any(b.permission is Permission.ALLOW for b in acls)
