"""The SASL settings of a scenario's clients, for the harness's own clients too.

A scenario on a SASL cluster puts librdkafka's keys (``security.protocol``,
``sasl.mechanism``, ``sasl.username``, ``sasl.password``) in its workload's
``client_config``; the workload's users get them with every other key, and the clients
the harness runs itself (topic set-up, the final read, the final-state capture with
kafka-python) take these keys from the same place."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cluster.security.sasl import MECHANISMS, SaslConfigError, SaslCredentials

SECURITY_KEYS = ("security.protocol", "sasl.mechanism", "sasl.username", "sasl.password")
_KAFKA_PYTHON = {
    "security.protocol": "security_protocol",
    "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
}


def security_config(client_config: Mapping[str, Any] | None) -> dict[str, Any]:
    """The security keys of a librdkafka configuration (empty: plaintext)."""
    return {k: client_config[k] for k in SECURITY_KEYS if client_config and k in client_config}


def kafka_python_security(security: Mapping[str, Any] | None) -> dict[str, Any]:
    """The same settings as kafka-python's client arguments."""
    return {_KAFKA_PYTHON[k]: v for k, v in (security or {}).items() if k in _KAFKA_PYTHON}


def sasl_credentials(
    protocol: str | None, mechanism: str | None, username: str | None, password: str | None
) -> SaslCredentials | None:
    """What the harness's own protocol clients log in with, from librdkafka's settings
    (None: PLAINTEXT); SaslConfigError names the setting that cannot be used."""
    protocol = (protocol or "PLAINTEXT").strip().upper()
    if protocol == "PLAINTEXT":
        return None
    if protocol != "SASL_PLAINTEXT":
        raise SaslConfigError(
            f"security.protocol: {protocol!r} is not supported (PLAINTEXT or SASL_PLAINTEXT)"
        )
    chosen = (mechanism or "").strip().upper()
    if chosen not in MECHANISMS:
        raise SaslConfigError(
            f"sasl.mechanism: {mechanism!r} is not supported (choose from {', '.join(MECHANISMS)})"
        )
    if not username or password is None:
        raise SaslConfigError("SASL_PLAINTEXT needs sasl.username and sasl.password")
    return SaslCredentials(chosen, username, password)
