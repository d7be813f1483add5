"""Kafka request/response encoding on top of kio's generated schemas.

A frame on the wire is ``int32 size`` followed by ``size`` bytes. This module turns
the bytes of one frame into (header, request) and a response entity back into
bytes, for the server side, and the reverse for the project's own protocol client.
"""

from __future__ import annotations

import io
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

_PREFIX = struct.Struct(">hhi")
_SIZE = struct.Struct(">i")


class ProtocolError(Exception):
    """A frame that cannot be understood. Kafka closes the connection on these."""


class UnsupportedApi(ProtocolError):
    """An API key or version kio (and so this node) has no schema for."""


@dataclass(frozen=True, slots=True)
class RequestPrefix:
    """The fixed first eight bytes of every request header."""

    api_key: int
    api_version: int
    correlation_id: int


def read_prefix(frame: bytes | memoryview) -> RequestPrefix:
    if len(frame) < _PREFIX.size:
        raise ProtocolError(f"frame of {len(frame)} bytes is shorter than a request header")
    api_key, api_version, correlation_id = _PREFIX.unpack_from(frame, 0)
    return RequestPrefix(api_key, api_version, correlation_id)


@cache
def request_class(api_key: int, api_version: int) -> type:
    try:
        return load_request_schema(api_key, api_version)
    except Exception as exc:  # kio raises its own index errors
        raise UnsupportedApi(f"no schema for api key {api_key} version {api_version}") from exc


@cache
def response_class(api_key: int, api_version: int) -> type:
    try:
        return load_response_schema(api_key, api_version)
    except Exception as exc:
        raise UnsupportedApi(f"no schema for api key {api_key} version {api_version}") from exc


@cache
def _reader(cls: type) -> Any:
    return entity_reader(cls)


@cache
def _writer(cls: type) -> Any:
    return entity_writer(cls)


def decode_request(frame: bytes) -> tuple[Any, Any]:
    """Decode one request frame (without its size prefix) into (header, request).

    Raises UnsupportedApi for API keys/versions without a schema and ProtocolError
    for bytes that do not decode.
    """
    prefix = read_prefix(frame)
    cls = request_class(prefix.api_key, prefix.api_version)
    header_cls = cls.__header_schema__
    try:
        header, used = _reader(header_cls)(frame, 0)
        body, _ = _reader(cls)(frame, used)
    except Exception as exc:
        # kio raises a variety of errors on bad bytes (its own SerialErrors, ValueError,
        # and KeyError for tagged fields it does not know); all mean "malformed".
        raise ProtocolError(
            f"malformed {cls.__name__} v{prefix.api_version}: {exc.__class__.__name__}: {exc}"
        ) from exc
    # Bytes after the body are ignored, as Kafka does: librdkafka 2.16, for one, sends
    # Metadata v12 with trailing fields of older versions.
    return header, body


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Encode a response entity, with its size prefix, for the given correlation id."""
    cls = type(response)
    header_cls = cls.__header_schema__
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    _writer(header_cls)(buf, header_cls(correlation_id=correlation_id))
    _writer(cls)(buf, response)
    data = buf.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    out = bytes(data)
    del data
    return out


def encode_request(correlation_id: int, request: Any, client_id: str | None) -> bytes:
    """Encode a request entity, with its size prefix (used by the project's own client)."""
    cls = type(request)
    header_cls = cls.__header_schema__
    header_kwargs: dict[str, Any] = {
        "request_api_key": cls.__api_key__,
        "request_api_version": cls.__version__,
        "correlation_id": correlation_id,
        "client_id": client_id,
    }
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    _writer(header_cls)(buf, header_cls(**header_kwargs))
    _writer(cls)(buf, request)
    data = buf.getbuffer()
    _SIZE.pack_into(data, 0, len(data) - 4)
    out = bytes(data)
    del data
    return out


def decode_response(api_key: int, api_version: int, frame: bytes) -> tuple[int, Any]:
    """Decode a response frame (without size prefix) into (correlation_id, response)."""
    cls = response_class(api_key, api_version)
    header_cls = cls.__header_schema__
    try:
        header, used = _reader(header_cls)(frame, 0)
        body, _ = _reader(cls)(frame, used)
    except Exception as exc:
        raise ProtocolError(f"malformed {cls.__name__}: {exc}") from exc
    return header.correlation_id, body


__all__ = [
    "ProtocolError",
    "RequestHeader",
    "RequestPrefix",
    "UnsupportedApi",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "read_prefix",
    "request_class",
    "response_class",
]
