"""Which internal partition a group id belongs to, exactly as Kafka computes it.

Kafka maps a group to ``__consumer_offsets`` partition
``Utils.abs(groupId.hashCode()) % partitions`` with Java's ``String.hashCode`` (over
UTF-16 code units, 32-bit overflow) and ``Utils.abs`` mapping ``Integer.MIN_VALUE``
to 0. Matching it keeps group placement identical to a real cluster's.
"""

from __future__ import annotations


def java_string_hash(value: str) -> int:
    """Java's ``String.hashCode()`` as a signed 32-bit int."""
    data = value.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def kafka_abs(n: int) -> int:
    """Kafka's ``Utils.abs``: ``Integer.MIN_VALUE`` maps to 0, not to itself."""
    return 0 if n == -(1 << 31) else abs(n)


def partition_for(key: str, num_partitions: int) -> int:
    return kafka_abs(java_string_hash(key)) % num_partitions
