"""The probes' Kafka client: one blocking connection, one request at a time, on kio.

Requests are kio's dataclasses of one exact API version, built from plain fields
(:func:`~txnchaos.cluster.protocol.build.make`) and written by kio's own generic encoder;
responses are read by kio's readers. None of the node's hand-written codecs is on this
path, so what the probes see of our cluster is what a Kafka client would see.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

from ...cluster.protocol.build import make
from ...cluster.protocol.codec import decode_response, encode_request_with_kio, request_class

CLIENT_ID = "txnchaos-conformance"
_SIZE = struct.Struct(">i")


class WireError(RuntimeError):
    """The connection failed or closed (the node went away, a frame it would not answer)."""


class Wire:
    """One connection to one node. ``send(api_key, version, **fields)`` returns kio's
    response entity; fields the version does not have are ignored, missing ones get
    Kafka's defaults."""

    def __init__(
        self, host: str, port: int, client_id: str = CLIENT_ID, timeout: float = 30.0
    ) -> None:
        self.address = (host, port)
        self.client_id = client_id
        self.timeout = timeout
        self._sock: socket.socket | None = None
        self._correlation = 0

    def _connect(self) -> socket.socket:
        if self._sock is None:
            try:
                sock = socket.create_connection(self.address, timeout=self.timeout)
            except OSError as exc:
                where = f"{self.address[0]}:{self.address[1]}"
                raise WireError(f"cannot connect to {where}: {exc}") from None
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            self._sock = sock
        return self._sock

    def send(self, api_key: int, version: int, **fields: Any) -> Any:
        request = make(request_class(api_key, version), None, **fields)
        self._correlation += 1
        frame = encode_request_with_kio(self._correlation, request, self.client_id)
        sock = self._connect()
        try:
            sock.sendall(frame)
            size = _SIZE.unpack(self._read(sock, 4))[0]
            body = self._read(sock, size)
        except (OSError, WireError) as exc:
            self.close()
            raise WireError(f"api {api_key} v{version}: {exc}") from None
        correlation, response = decode_response(api_key, version, body)
        if correlation != self._correlation:
            self.close()
            raise WireError(f"correlation id {correlation}, expected {self._correlation}")
        return response

    @staticmethod
    def _read(sock: socket.socket, n: int) -> bytes:
        chunks = []
        while n:
            chunk = sock.recv(min(n, 1 << 20))
            if not chunk:
                raise WireError("connection closed by the node")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None
