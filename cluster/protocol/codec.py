"""Kafka request/response encoding on top of kio's generated schemas.

A frame on the wire is ``int32 size`` followed by ``size`` bytes. This module turns
the bytes of one frame into (header, request) and a response entity back into
bytes, for the server side, and the reverse for the project's own protocol client.
"""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any, TypeVar

from kio.index import load_request_schema, load_response_schema
from kio.schema.request_header.v2.header import RequestHeader
from kio.serial import entity_reader, entity_writer

from .describe_transactions_reader import read_describe_transactions_v0
from .frame_guard import MalformedFrame, request_guard

_PREFIX = struct.Struct(">hhi")
DESCRIBE_TRANSACTIONS = 65  # decoded by hand (kio refuses its -1 start time)
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
def request_class(api_key: int, api_version: int) -> type[Any]:
    try:
        return load_request_schema(api_key, api_version)
    except Exception as exc:  # kio raises its own index errors
        raise UnsupportedApi(f"no schema for api key {api_key} version {api_version}") from exc


@cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    try:
        return load_response_schema(api_key, api_version)
    except Exception as exc:
        raise UnsupportedApi(f"no schema for api key {api_key} version {api_version}") from exc


R = TypeVar("R")


def per_class(f: Callable[[type], R]) -> Callable[[type], R]:
    """``functools.cache`` for a function of a class, typed to take any class: typeshed's
    ``cache`` wants ``Hashable`` arguments, and mypy does not count every ``type[...]`` as
    one (class objects hash by identity)."""
    return cache(f)


@per_class
def _reader(cls: type) -> Any:
    return entity_reader(cls)


@per_class
def _writer(cls: type) -> Any:
    return entity_writer(cls)


@cache
def _request_readers(api_key: int, api_version: int) -> tuple[Any, Any, Callable[[bytes], int]]:
    cls: Any = request_class(api_key, api_version)
    return _reader(cls.__header_schema__), _reader(cls), request_guard(cls)


def decode_request(frame: bytes) -> tuple[Any, Any]:
    """Decode one request frame (without its size prefix) into (header, request).

    Raises UnsupportedApi for API keys/versions without a schema and ProtocolError
    for bytes that do not decode.
    """
    prefix = read_prefix(frame)
    return decode_request_as(frame, prefix.api_key, prefix.api_version)


def decode_request_as(frame: bytes, api_key: int, api_version: int) -> tuple[Any, Any]:
    """``decode_request`` for a caller that read the frame's key and version already."""
    readers = _request_readers(api_key, api_version)
    try:
        readers[2](frame)  # before kio, which trusts counts (see frame_guard)
    except MalformedFrame as exc:
        cls = request_class(api_key, api_version)
        raise ProtocolError(f"malformed {cls.__name__} v{api_version}: {exc}") from None
    try:
        header, used = readers[0](frame, 0)
        body, _ = readers[1](frame, used)
    except Exception as exc:
        # kio raises a variety of errors on bad bytes (its own SerialErrors, ValueError,
        # and KeyError for tagged fields it does not know); all mean "malformed".
        cls = request_class(api_key, api_version)
        raise ProtocolError(
            f"malformed {cls.__name__} v{api_version}: {exc.__class__.__name__}: {exc}"
        ) from exc
    # Bytes after the body are ignored, as Kafka does: librdkafka 2.16, for one, sends
    # Metadata v12 with trailing fields of older versions.
    return header, body


class EncodedResponse:
    """A response whose body a hand-written encoder (``hot_codecs``) already produced.

    Handlers on the hot path return this instead of a kio entity; the server only
    adds the size prefix and the response header. ``error_codes`` are the non-zero
    error codes in the body (for the request metrics). Reading any other attribute
    decodes the body with kio once and answers from that entity, so code that
    inspects responses (tests, tools) sees the usual kio object.
    """

    __slots__ = ("_entity", "api_key", "api_version", "body", "error_codes")

    def __init__(
        self, api_key: int, api_version: int, body: bytes, error_codes: tuple[int, ...] = ()
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.body = body
        self.error_codes = error_codes
        self._entity: Any = None

    @property
    def entity(self) -> Any:
        """The body decoded by kio (the kio response entity)."""
        if self._entity is None:
            cls: Any = response_class(self.api_key, self.api_version)
            self._entity, _ = _reader(cls)(self.body, 0)
        return self._entity

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.entity, name)

    def __repr__(self) -> str:
        return f"EncodedResponse({self.entity!r})"


@cache
def _response_header_flexible(api_key: int, api_version: int) -> bool:
    cls: Any = response_class(api_key, api_version)
    return bool(cls.__header_schema__.__flexible__)


_HEADER_V0 = struct.Struct(">ii")
_HEADER_V1 = struct.Struct(">iib")


def _encode_prebuilt(correlation_id: int, response: EncodedResponse) -> bytes:
    body = response.body
    if _response_header_flexible(response.api_key, response.api_version):
        return _HEADER_V1.pack(len(body) + 5, correlation_id, 0) + body
    return _HEADER_V0.pack(len(body) + 4, correlation_id) + body


def encode_response(correlation_id: int, response: Any) -> bytes:
    """Encode a response entity, with its size prefix, for the given correlation id."""
    if type(response) is EncodedResponse:
        return _encode_prebuilt(correlation_id, response)
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


_REQUEST_HEADER_V1 = struct.Struct(">ihhih")


@cache
def _fast_request_encoder(cls: Any) -> Callable[[Any], bytes] | None:
    """The hand-written body encoder for a request class, if there is one."""
    from . import client_codecs, hot_codecs, verify_codecs

    if cls.__api_key__ == 27 and cls.__version__ in hot_codecs.WRITE_TXN_MARKERS_VERSIONS:
        return hot_codecs.write_txn_markers_request
    if cls.__api_key__ == 24 and cls.__version__ in verify_codecs.VERSIONS:
        return verify_codecs.add_partitions_to_txn_request
    if cls.__api_key__ == 0 and cls.__version__ in client_codecs.PRODUCE_VERSIONS:
        return client_codecs.produce_request
    if cls.__api_key__ == 26 and cls.__version__ in client_codecs.END_TXN_VERSIONS:
        return client_codecs.end_txn_request
    return None


def encode_request(correlation_id: int, request: Any, client_id: str | None) -> bytes:
    """Encode a request entity, with its size prefix (used by the project's own client)."""
    cls: Any = type(request)
    fast = _fast_request_encoder(cls)
    if fast is not None and cls.__header_schema__.__flexible__:
        # Request header v2: key, version, correlation id, client id (a classic
        # nullable string even here), then no tagged fields.
        raw = b"" if client_id is None else client_id.encode()
        body = fast(request)
        return (
            _REQUEST_HEADER_V1.pack(
                10 + len(raw) + 1 + len(body),
                cls.__api_key__,
                cls.__version__,
                correlation_id,
                -1 if client_id is None else len(raw),
            )
            + raw
            + b"\x00"
            + body
        )
    return encode_request_with_kio(correlation_id, request, client_id)


def encode_request_with_kio(correlation_id: int, request: Any, client_id: str | None) -> bytes:
    """``encode_request`` with kio's generic encoder only (the reference the
    hand-written encoders are tested against)."""
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
        if api_key == DESCRIBE_TRANSACTIONS and api_version == 0:
            body = read_describe_transactions_v0(frame, used)  # its -1 start time
        else:
            body, _ = _reader(cls)(frame, used)
    except Exception as exc:
        raise ProtocolError(f"malformed {cls.__name__}: {exc}") from exc
    return header.correlation_id, body


__all__ = [
    "EncodedResponse",
    "ProtocolError",
    "RequestHeader",
    "RequestPrefix",
    "UnsupportedApi",
    "decode_request",
    "decode_request_as",
    "decode_response",
    "encode_request",
    "encode_request_with_kio",
    "encode_response",
    "read_prefix",
    "request_class",
    "response_class",
]
