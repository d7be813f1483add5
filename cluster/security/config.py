"""The access-control settings (Kafka's names), checked together: a SASL listener
needs users and the node's own credentials; an authorizer needs authenticated
principals."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .authorizer import parse_super_users
from .sasl import MECHANISMS, JaasConfig, SaslConfigError, SaslCredentials

PLAINTEXT, SASL_PLAINTEXT = "PLAINTEXT", "SASL_PLAINTEXT"
PROTOCOLS = (PLAINTEXT, SASL_PLAINTEXT)
AUTHORIZERS = (
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
    "StandardAuthorizer",
    "AclAuthorizer",
)
"""``authorizer.class.name`` values that turn on ACL authorization (one implementation:
Kafka's semantics); empty turns it off."""

_JAAS_SECTION = re.compile(r"KafkaServer\s*\{(.*?)\}\s*;", re.S)


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    protocol: str
    mechanisms: tuple[str, ...]
    inter_node: SaslCredentials | None
    users: dict[str, str]
    authorizer: bool
    super_users: frozenset[str]
    allow_if_no_acl: bool

    @property
    def sasl(self) -> bool:
        return self.protocol == SASL_PLAINTEXT

    @property
    def active(self) -> bool:
        return self.sasl or self.authorizer

    @classmethod
    def from_settings(cls, get: Callable[[str], Any]) -> SecurityConfig:
        protocol = get("listener.security.protocol").strip().upper()
        if protocol not in PROTOCOLS:
            raise SaslConfigError(
                f"listener.security.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}"
            )
        mechanisms = tuple(
            m.strip().upper() for m in get("sasl.enabled.mechanisms").split(",") if m.strip()
        )
        authorizer_name = get("authorizer.class.name").strip()
        if authorizer_name and authorizer_name not in AUTHORIZERS:
            raise SaslConfigError(
                f"authorizer.class.name: {authorizer_name!r} is not one of {', '.join(AUTHORIZERS)}"
            )
        config = cls(
            protocol=protocol,
            mechanisms=mechanisms,
            inter_node=None,
            users={},
            authorizer=bool(authorizer_name),
            super_users=parse_super_users(get("super.users")),
            allow_if_no_acl=bool(get("allow.everyone.if.no.acl.found")),
        )
        if config.authorizer and not config.sasl:
            raise SaslConfigError(
                "authorizer.class.name needs listener.security.protocol=SASL_PLAINTEXT "
                "(without authentication every client is User:ANONYMOUS)"
            )
        if not config.sasl:
            return config
        unknown = [m for m in mechanisms if m not in MECHANISMS]
        if unknown or not mechanisms:
            raise SaslConfigError(
                f"sasl.enabled.mechanisms: {', '.join(unknown) or 'empty'} not supported "
                f"(choose from {', '.join(MECHANISMS)})"
            )
        inter = get("sasl.mechanism.inter.broker.protocol").strip().upper()
        if inter not in mechanisms:
            raise SaslConfigError(
                f"sasl.mechanism.inter.broker.protocol: {inter} is not in sasl.enabled.mechanisms"
            )
        jaas = _jaas(get("sasl.jaas.config"), get("txnchaos.sasl.jaas.config.file"))
        if not jaas.users:
            raise SaslConfigError(
                'SASL_PLAINTEXT needs users: sasl.jaas.config with user_<name>="<password>" entries'
            )
        if not jaas.username or jaas.password is None:
            raise SaslConfigError(
                'SASL_PLAINTEXT needs the nodes\' own credentials: username="..." password="..." '
                "in sasl.jaas.config"
            )
        if jaas.users.get(jaas.username) != jaas.password:
            raise SaslConfigError(
                f"sasl.jaas.config: the nodes' user {jaas.username!r} must be among the "
                "user_<name> entries with the same password"
            )
        node_principal = f"User:{jaas.username}"
        return cls(
            protocol=protocol,
            mechanisms=mechanisms,
            inter_node=SaslCredentials(inter, jaas.username, jaas.password),
            users=dict(jaas.users),
            authorizer=config.authorizer,
            # the nodes act on the cluster (markers, verification, registration)
            super_users=config.super_users | {node_principal},
            allow_if_no_acl=config.allow_if_no_acl,
        )


def _jaas(inline: str, file: str) -> JaasConfig:
    if inline.strip() and file.strip():
        raise SaslConfigError("set sasl.jaas.config or txnchaos.sasl.jaas.config.file, not both")
    text = inline
    if file.strip():
        try:
            text = Path(file).read_text()
        except OSError as exc:
            raise SaslConfigError(f"txnchaos.sasl.jaas.config.file: {exc}") from exc
        section = _JAAS_SECTION.search(text)
        if section is not None:
            text = section.group(1)
    return JaasConfig.parse(text)
