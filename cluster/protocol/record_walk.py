"""Walking the records of a v2 batch, as Kafka's DefaultRecord.readFrom reads them.

A produced batch's header says how many records it holds; its records must say the same.
``walk_records`` reads every record between the header and the batch's end and checks its
structure: the length varint and a body that ends exactly there, varints of at most 5
bytes (10 for the timestamp delta) whose values fit their Java type, key and value
lengths of -1 (null) or more, a header count no larger than the bytes left, header keys
not null, and no bytes after the last record. One more rule than Kafka: each record's
offset delta is its index (Kafka reassigns offsets of a compressed batch whose inner
offsets are wrong, and takes an uncompressed one's as they come; every v2 client writes
0, 1, 2 ...). A consumer that trusts the header (every one does) is never handed a batch
whose records contradict it.

The loop is the Produce hot path's only per-record work, so it is written flat: one-byte
varints (nearly every field of a small record) are read inline, and a field that runs past
its record is caught by the final position check or an IndexError, not by a bound test
per read.
"""

from __future__ import annotations

_BITS = {5: 32, 10: 64}  # varint (Java int), varlong (Java long)
MIN_RECORD_BODY = 6  # attributes, then five one-byte varints


class BadRecords(ValueError):
    """The records do not match the batch that carries them (Kafka: InvalidRecordException)."""


def _raw_varint(buf: bytes | bytearray, pos: int, max_bytes: int) -> tuple[int, int]:
    """The unsigned (still zig-zagged) varint at ``pos`` of at most ``max_bytes`` bytes
    whose value fits its Java type (int for 5, long for 10): (raw, position after)."""
    shift = 0
    raw = 0
    for used in range(max_bytes):
        byte = buf[pos + used]
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            if raw >> _BITS[max_bytes]:
                break
            return raw, pos + used + 1
        shift += 7
    raise BadRecords(f"varint at byte {pos} is too long for its type")


def _varint(buf: bytes | bytearray, pos: int, max_bytes: int) -> tuple[int, int]:
    """The signed varint at ``pos``: (value, position after)."""
    raw, pos = _raw_varint(buf, pos, max_bytes)
    return (raw >> 1) ^ -(raw & 1), pos


def walk_records(buf: bytes | bytearray, pos: int, count: int) -> tuple[int, int]:
    """Check the ``count`` records in ``buf[pos:]`` (the batch ends with ``buf``); return
    a lower bound of their timestamp deltas (exact when one is negative, else 0) and the
    largest. Raises BadRecords naming the first problem.

    Fields are compared in their zig-zag form where that is enough (an offset delta ``i``
    is ``2i``, a length ``n >= 0`` is ``2n``, -1 is 1), which keeps the per-record work to
    a few integer operations."""
    if count <= 0:
        raise BadRecords(f"invalid record count {count}")
    end = len(buf)
    first = pos
    top = 0  # largest zig-zag timestamp delta among the non-negative ones
    negative = False
    index = 0
    expected = 0  # zig-zag of the offset delta record ``index`` must have
    try:
        for index in range(count):
            z = buf[pos]  # IndexError past the end: fewer records than the count
            if z < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                z = (z & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                z, pos = _raw_varint(buf, pos, 5)
            length = z >> 1
            stop = pos + length
            if z & 1 or length < MIN_RECORD_BODY or stop > end:
                length = (z >> 1) ^ -(z & 1)
                raise BadRecords(
                    f"Invalid record size: expected {length} bytes in record {index}'s payload, "
                    f"but the batch has {end - pos} bytes left"
                )
            z = buf[pos + 1]  # after the attributes (no bit is defined for a v2 record)
            if z < 0x80:
                pos += 2
            else:
                z, pos = _raw_varint(buf, pos + 1, 10)
            if z & 1:
                negative = True
            elif z > top:
                top = z
            z = buf[pos]
            if z < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                z = (z & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                z, pos = _raw_varint(buf, pos, 5)
            if z != expected:
                raise BadRecords(
                    f"record {index} has offset delta {(z >> 1) ^ -(z & 1)}, not {index}"
                )
            expected += 2
            z = buf[pos]
            if z < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                z = (z & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                z, pos = _raw_varint(buf, pos, 5)
            if z & 1:
                if z != 1:
                    raise BadRecords(f"record {index} has key length {(z >> 1) ^ -1}")
            else:
                pos += z >> 1
            z = buf[pos]
            if z < 0x80:
                pos += 1
            elif buf[pos + 1] < 0x80:
                z = (z & 0x7F) | (buf[pos + 1] << 7)
                pos += 2
            else:
                z, pos = _raw_varint(buf, pos, 5)
            if z & 1:
                if z != 1:
                    raise BadRecords(f"record {index} has value length {(z >> 1) ^ -1}")
            else:
                pos += z >> 1
            z = buf[pos]
            if z:
                if z < 0x80:
                    pos += 1
                else:
                    z, pos = _raw_varint(buf, pos, 5)
                pos = _skip_headers(buf, pos, stop, (z >> 1) ^ -(z & 1), index)
            else:
                pos += 1
            if pos != stop:
                raise BadRecords(
                    f"Invalid record size: expected to read {length} bytes in record {index}'s "
                    f"payload, but instead read {pos - stop + length}"
                )
    except IndexError:
        if pos >= end:
            raise BadRecords(
                f"Incorrect declared batch size, premature EOF reached: "
                f"{index} of {count} records present"
            ) from None
        raise BadRecords(f"Found invalid record structure in record {index}") from None
    if pos != end:
        raise BadRecords(
            f"Incorrect declared batch size, records still remaining in file: "
            f"{end - pos} bytes after record {count - 1}"
        )
    if negative:
        return _delta_bounds(buf, first, count)
    return 0, top >> 1


def _skip_headers(buf: bytes | bytearray, pos: int, stop: int, count: int, index: int) -> int:
    if count < 0 or count > stop - pos:
        raise BadRecords(f"Found invalid number of record headers {count} in record {index}")
    for _ in range(count):
        size, pos = _varint(buf, pos, 5)
        if size < 0:
            raise BadRecords(f"record {index} has a header key of length {size}")
        pos += size
        size, pos = _varint(buf, pos, 5)
        if size > 0:
            pos += size
        elif size < -1:
            raise BadRecords(f"record {index} has a header value of length {size}")
        if pos > stop:
            break  # the caller reports the overrun
    return pos


def _delta_bounds(buf: bytes | bytearray, pos: int, count: int) -> tuple[int, int]:
    """The smallest and largest timestamp delta of well-formed records."""
    deltas = []
    for _ in range(count):
        length, pos = _varint(buf, pos, 5)
        deltas.append(_varint(buf, pos + 1, 10)[0])
        pos += length
    return min(deltas), max(deltas)


def timestamp_outliers(
    buf: bytes | bytearray, pos: int, count: int, base: int, earliest: int, latest: int
) -> list[int]:
    """Indexes of the records (already walked: well formed) whose timestamp
    ``base + delta`` is outside [earliest, latest]; -1 (no timestamp) is never one."""
    out = []
    for index in range(count):
        length, pos = _varint(buf, pos, 5)
        stop = pos + length
        delta, _ = _varint(buf, pos + 1, 10)
        timestamp = base + delta
        if timestamp != -1 and not earliest <= timestamp <= latest:
            out.append(index)
        pos = stop
    return out
