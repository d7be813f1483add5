"""SASL mechanisms, server and client side: PLAIN (RFC 4616) and SCRAM-SHA-256/512
(RFC 5802/7677), with users and passwords from a JAAS-style configuration."""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import re
from dataclasses import dataclass, field
from typing import Protocol

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
MECHANISMS = (PLAIN, SCRAM_SHA_256, SCRAM_SHA_512)
SCRAM_HASHES = {SCRAM_SHA_256: "sha256", SCRAM_SHA_512: "sha512"}
SCRAM_ITERATIONS = 4096
"""Kafka's minimum (and its tools' default) iteration count."""


class AuthenticationFailed(Exception):
    """The client's credentials were refused (its message goes back to the client)."""


class SaslConfigError(ValueError):
    """A SASL setting that cannot be used (a clear error at start-up)."""


_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class JaasConfig:
    """What a PlainLoginModule / ScramLoginModule line says: this node's own
    credentials (``username``/``password``, used towards its peers) and the users it
    accepts (``user_<name>="<password>"``)."""

    username: str | None = None
    password: str | None = None
    users: dict[str, str] = field(default_factory=dict)

    @classmethod
    def parse(cls, text: str) -> JaasConfig:
        """``org.apache.kafka...PlainLoginModule required username="a" password="b"
        user_a="b" user_c="d";`` (the module name is not checked)."""
        body = text.strip().rstrip(";")
        if body and " required" not in f" {body}" and "required " not in body:
            raise SaslConfigError(
                "sasl.jaas.config: expected '<LoginModule> required key=\"value\" ...;', "
                f"got {text!r}"
            )
        options = {m.group(1): m.group(2).replace('\\"', '"') for m in _JAAS_OPTION.finditer(body)}
        users = {k.removeprefix("user_"): v for k, v in options.items() if k.startswith("user_")}
        return cls(options.get("username"), options.get("password"), users)


# -- server side ------------------------------------------------------------------------
class ServerExchange(Protocol):
    def step(self, token: bytes) -> bytes:
        """Answer one client token; raises AuthenticationFailed."""
        ...

    @property
    def principal(self) -> str | None:
        """``User:<name>`` once the exchange succeeded, else None."""
        ...


class PlainServer:
    def __init__(self, users: dict[str, str]) -> None:
        self.users = users
        self.principal: str | None = None

    def step(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise AuthenticationFailed("Invalid SASL/PLAIN response: expected 3 tokens")
        authzid, user_b, password_b = (p.decode("utf-8", "replace") for p in parts)
        if not user_b or not password_b:
            raise AuthenticationFailed("Authentication failed: username or password is empty")
        if authzid and authzid != user_b:
            raise AuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is "
                "different from username"
            )
        expected = self.users.get(user_b)
        if expected is None or not hmac.compare_digest(expected.encode(), password_b.encode()):
            raise AuthenticationFailed("Authentication failed: Invalid username or password")
        self.principal = f"User:{user_b}"
        return b""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    iterations: int
    stored_key: bytes
    server_key: bytes

    @classmethod
    def derive(cls, hash_name: str, password: str, salt: bytes, iterations: int) -> ScramCredential:
        salted = hashlib.pbkdf2_hmac(hash_name, password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", hash_name)
        return cls(
            salt,
            iterations,
            hashlib.new(hash_name, client_key).digest(),
            hmac.digest(salted, b"Server Key", hash_name),
        )


def _scram_attributes(message: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in message.split(","):
        key, sep, value = part.partition("=")
        if sep and len(key) == 1:
            out.setdefault(key, value)
    return out


def _scram_name(raw: str) -> str:
    return raw.replace("=2C", ",").replace("=3D", "=")


def _xor(a: bytes, b: bytes) -> bytes:
    return bytes(x ^ y for x, y in zip(a, b, strict=True))


class ScramServer:
    """RFC 5802 server: client-first, server-first (nonce, salt, iterations),
    client-final (proof checked against the stored key), server-final (signature)."""

    def __init__(self, mechanism: str, credentials: dict[str, ScramCredential]) -> None:
        self.hash_name = SCRAM_HASHES[mechanism]
        self.credentials = credentials
        self.principal: str | None = None
        self._state: tuple[str, str, str, ScramCredential] | None = None

    def step(self, token: bytes) -> bytes:
        message = token.decode("utf-8", "replace")
        if self._state is None:
            return self._first(message)
        return self._final(message)

    def _first(self, message: str) -> bytes:
        gs2, sep, bare = message.partition(",")
        authzid, sep2, bare = bare.partition(",")
        if not sep or not sep2 or gs2 not in ("n", "y"):
            raise AuthenticationFailed("Invalid SCRAM client-first message")
        attrs = _scram_attributes(bare)
        user, nonce = _scram_name(attrs.get("n", "")), attrs.get("r", "")
        if not user or not nonce:
            raise AuthenticationFailed("Invalid SCRAM client-first message")
        if authzid.startswith("a=") and _scram_name(authzid[2:]) != user:
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        credential = self.credentials.get(user)
        if credential is None:
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        server_nonce = nonce + base64.b64encode(os.urandom(18)).decode()
        salt = base64.b64encode(credential.salt).decode()
        server_first = f"r={server_nonce},s={salt},i={credential.iterations}"
        self._state = (user, bare, server_first, credential)
        return server_first.encode()

    def _final(self, message: str) -> bytes:
        assert self._state is not None
        user, client_first_bare, server_first, credential = self._state
        without_proof, sep, proof_part = message.rpartition(",p=")
        attrs = _scram_attributes(without_proof)
        if not sep or attrs.get("r") != _scram_attributes(server_first)["r"]:
            raise AuthenticationFailed("Invalid SCRAM client-final message")
        auth_message = f"{client_first_bare},{server_first},{without_proof}".encode()
        signature = hmac.digest(credential.stored_key, auth_message, self.hash_name)
        try:
            client_key = _xor(base64.b64decode(proof_part), signature)
        except ValueError:
            raise AuthenticationFailed("Invalid SCRAM client proof") from None
        stored = hashlib.new(self.hash_name, client_key).digest()
        if not hmac.compare_digest(stored, credential.stored_key):
            raise AuthenticationFailed("Authentication failed: Invalid user credentials")
        self.principal = f"User:{user}"
        server_signature = hmac.digest(credential.server_key, auth_message, self.hash_name)
        return f"v={base64.b64encode(server_signature).decode()}".encode()


class ServerMechanisms:
    """The mechanisms a node's listener offers, with the users they accept."""

    def __init__(self, enabled: tuple[str, ...], users: dict[str, str]) -> None:
        unknown = [m for m in enabled if m not in MECHANISMS]
        if unknown or not enabled:
            raise SaslConfigError(
                f"sasl.enabled.mechanisms: {', '.join(unknown) or 'empty'} not supported "
                f"(choose from {', '.join(MECHANISMS)})"
            )
        self.enabled = enabled
        self.users = dict(users)
        self._scram = {
            mech: {
                user: ScramCredential.derive(
                    SCRAM_HASHES[mech], password, os.urandom(16), SCRAM_ITERATIONS
                )
                for user, password in users.items()
            }
            for mech in enabled
            if mech in SCRAM_HASHES
        }

    def start(self, mechanism: str) -> ServerExchange:
        if mechanism == PLAIN:
            return PlainServer(self.users)
        return ScramServer(mechanism, self._scram[mechanism])


# -- client side (node to node) ---------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SaslCredentials:
    """What a node presents to its peers: mechanism, username, password."""

    mechanism: str
    username: str
    password: str

    def exchange(self) -> ClientExchange:
        if self.mechanism == PLAIN:
            return PlainClient(self.username, self.password)
        return ScramClient(self.mechanism, self.username, self.password)


class ClientExchange(Protocol):
    def first(self) -> bytes: ...

    def answer(self, server_token: bytes) -> bytes | None:
        """The next token for the server's ``server_token``; None: done."""
        ...


class PlainClient:
    def __init__(self, username: str, password: str) -> None:
        self.token = b"\0" + username.encode() + b"\0" + password.encode()

    def first(self) -> bytes:
        return self.token

    def answer(self, server_token: bytes) -> bytes | None:
        return None


class ScramClient:
    def __init__(self, mechanism: str, username: str, password: str) -> None:
        self.hash_name = SCRAM_HASHES[mechanism]
        self.password = password
        name = username.replace("=", "=3D").replace(",", "=2C")
        self.nonce = base64.b64encode(os.urandom(18)).decode()
        self.first_bare = f"n={name},r={self.nonce}"
        self._server_key: bytes | None = None
        self._auth_message = b""

    def first(self) -> bytes:
        return f"n,,{self.first_bare}".encode()

    def answer(self, server_token: bytes) -> bytes | None:
        message = server_token.decode()
        if self._server_key is not None:
            attrs = _scram_attributes(message)
            expected = hmac.digest(self._server_key, self._auth_message, self.hash_name)
            if base64.b64decode(attrs.get("v", "")) != expected:
                raise AuthenticationFailed("the server's SCRAM signature is wrong")
            return None
        attrs = _scram_attributes(message)
        nonce = attrs.get("r", "")
        if not nonce.startswith(self.nonce):
            raise AuthenticationFailed("the server's SCRAM nonce is wrong")
        salt, iterations = base64.b64decode(attrs["s"]), int(attrs["i"])
        salted = hashlib.pbkdf2_hmac(self.hash_name, self.password.encode(), salt, iterations)
        client_key = hmac.digest(salted, b"Client Key", self.hash_name)
        stored_key = hashlib.new(self.hash_name, client_key).digest()
        without_proof = f"c=biws,r={nonce}"
        self._auth_message = f"{self.first_bare},{message},{without_proof}".encode()
        signature = hmac.digest(stored_key, self._auth_message, self.hash_name)
        self._server_key = hmac.digest(salted, b"Server Key", self.hash_name)
        proof = base64.b64encode(_xor(client_key, signature)).decode()
        return f"{without_proof},p={proof}".encode()
