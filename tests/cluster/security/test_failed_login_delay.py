"""Issue 35 item 11: a failed SASL authentication is answered after
connection.failed.authentication.delay.ms, as Kafka delays it (27,597 bad logins were
answered in 30 s). The sleep is observed, not timed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from txnchaos.cluster.security import authentication
from txnchaos.cluster.security.authentication import SASL_AUTHENTICATION_FAILED, Authenticator
from txnchaos.cluster.security.sasl import ServerMechanisms
from txnchaos.cluster.settings import NodeSettings


@dataclass
class Ctx:
    connection_id: int = 1
    peer: str = "127.0.0.1:1"
    api_version: int = 1

    def respond(self, **fields: Any) -> dict[str, Any]:
        return fields


@dataclass
class Request:
    mechanism: str = "PLAIN"
    auth_bytes: bytes = b"\0alice\0wrong"


def test_a_failed_login_is_answered_after_the_delay(monkeypatch: pytest.MonkeyPatch) -> None:
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    monkeypatch.setattr(authentication.asyncio, "sleep", sleep)
    delay_ms = NodeSettings().get("connection.failed.authentication.delay.ms")
    auth = Authenticator(
        ServerMechanisms(("PLAIN",), {"alice": "right"}), failure_delay_s=delay_ms / 1000
    )
    ctx, request = Ctx(), Request()
    assert asyncio.run(auth.handshake(ctx, request))["error_code"] == 0
    answer = asyncio.run(auth.authenticate(ctx, request))
    assert answer["error_code"] == SASL_AUTHENTICATION_FAILED
    assert slept == [0.1]  # Kafka's default, 100 ms
