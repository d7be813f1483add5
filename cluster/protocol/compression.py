"""Decompressing a v2 batch's records (gzip, snappy, lz4, zstd), within a size bound.

The broker stores batches as they come, but it must read a compressed batch's records to
check them against its header, as Kafka's LogValidator does. Kafka streams them; here a
batch is decompressed whole, so the output is bounded (``limit``): a batch that expands
beyond it is refused (``TooLarge``) instead of taking the node's memory. Framing follows
what Kafka's own codecs read:

- gzip: RFC 1952 members (GZIPInputStream reads concatenated ones);
- snappy: xerial's framing (``\\x82SNAPPY\\x00``, two int32 versions, then blocks of an
  int32 length and a raw snappy block) or, without that magic, one raw snappy block
  (xerial's SnappyInputStream falls back to it; librdkafka writes it);
- lz4: the LZ4 frame format (KIP-57; magic v2 batches have a correct header checksum);
- zstd: zstd frames.
"""

from __future__ import annotations

import struct
import zlib

import cramjam

NONE = 0
GZIP = 1
SNAPPY = 2
LZ4 = 3
ZSTD = 4
CODEC_NAMES = {NONE: "none", GZIP: "gzip", SNAPPY: "snappy", LZ4: "lz4", ZSTD: "zstd"}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = len(XERIAL_MAGIC) + 8  # magic, version, compatible version
_BLOCK_LENGTH = struct.Struct(">i")
_FULL = "failed to write whole buffer"  # cramjam: the output buffer is too small
_FIRST_GUESS = 4  # first output buffer: this many times the compressed size


class Undecodable(ValueError):
    """The payload is not valid data of its codec."""


class TooLarge(ValueError):
    """The payload decompresses to more than the limit."""


def decompress(codec: int, payload: bytes | memoryview, limit: int) -> bytes | bytearray:
    """The decompressed records of a batch of ``codec`` (1-4), at most ``limit`` bytes."""
    if codec == GZIP:
        return _gunzip(payload, limit)
    if codec == SNAPPY:
        return _unsnappy(payload, limit)
    if codec == LZ4:
        return _bounded(cramjam.lz4.decompress_into, payload, limit)
    if codec == ZSTD:
        return _bounded(cramjam.zstd.decompress_into, payload, limit)
    raise ValueError(f"unknown compression codec {codec}")


def compress(codec: int, data: bytes) -> bytes:
    """``data`` compressed as a producer writes a batch's records (the project's own
    clients and tests; the broker never compresses)."""
    if codec == GZIP:
        packer = zlib.compressobj(wbits=16 + zlib.MAX_WBITS)
        return packer.compress(data) + packer.flush()
    if codec == SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec == LZ4:
        return bytes(cramjam.lz4.compress(data))
    if codec == ZSTD:
        return bytes(cramjam.zstd.compress(data))
    raise ValueError(f"unknown compression codec {codec}")


def xerial_snappy(data: bytes, block_size: int = 32 * 1024) -> bytes:
    """``data`` in xerial's snappy framing (what Kafka's Java producer writes)."""
    out = [XERIAL_MAGIC, struct.pack(">ii", 1, 1)]
    for start in range(0, len(data), block_size):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + block_size]))
        out += [_BLOCK_LENGTH.pack(len(block)), block]
    return b"".join(out)


def _bounded(decompress_into: object, payload: bytes | memoryview, limit: int) -> bytearray:
    """Decompress into a buffer that grows (x4) on demand, never past ``limit``."""
    size = min(limit, max(1 << 16, _FIRST_GUESS * len(payload)))
    while True:
        out = bytearray(size)
        try:
            written = decompress_into(bytes(payload), out)  # type: ignore[operator]
        except cramjam.DecompressionError as e:
            if _FULL not in str(e):
                raise Undecodable(str(e)) from None
            if size >= limit:
                raise TooLarge(f"records decompress to more than {limit} bytes") from None
            size = min(limit, size * 4)
            continue
        del out[written:]
        return out


def _gunzip(payload: bytes | memoryview, limit: int) -> bytes:
    parts = []
    total = 0
    data = bytes(payload)
    while data:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            part = inflater.decompress(data, limit - total + 1)
        except zlib.error as e:
            raise Undecodable(f"gzip: {e}") from None
        total += len(part)
        if total > limit:
            raise TooLarge(f"records decompress to more than {limit} bytes")
        if not inflater.eof:
            raise Undecodable("gzip: truncated stream")
        parts.append(part)
        data = inflater.unused_data
    return b"".join(parts)


def _unsnappy(payload: bytes | memoryview, limit: int) -> bytes:
    data = bytes(payload)
    if not data.startswith(XERIAL_MAGIC):
        return _raw_snappy(data, limit)
    if len(data) < XERIAL_HEADER:
        raise Undecodable("snappy: truncated xerial header")
    parts = []
    total = 0
    pos = XERIAL_HEADER
    while pos < len(data):
        if pos + 4 > len(data):
            raise Undecodable("snappy: truncated block length")
        (length,) = _BLOCK_LENGTH.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > len(data):
            raise Undecodable(f"snappy: block of {length} bytes at {pos} truncated")
        block = _raw_snappy(data[pos : pos + length], limit - total)
        total += len(block)
        parts.append(block)
        pos += length
    return b"".join(parts)


def _raw_snappy(data: bytes, limit: int) -> bytes:
    try:
        size = cramjam.snappy.decompress_raw_len(data)
    except cramjam.DecompressionError as e:
        raise Undecodable(str(e)) from None
    if size > limit:
        raise TooLarge(f"records decompress to more than {limit} bytes")
    try:
        return bytes(cramjam.snappy.decompress_raw(data))
    except cramjam.DecompressionError as e:
        raise Undecodable(str(e)) from None
