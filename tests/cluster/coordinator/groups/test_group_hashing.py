"""Group -> internal partition mapping matches Kafka's (Java String.hashCode)."""

from __future__ import annotations

from txnchaos.cluster.coordinator.groups.hashing import java_string_hash, kafka_abs, partition_for


def test_java_string_hash_known_values() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("a") == 97
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("test") == 3556498
    assert java_string_hash("polygenelubricants") == -(2**31)
    assert java_string_hash("\U0001f600") == 0xD83D * 31 + 0xDE00  # UTF-16 surrogates


def test_partition_for() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("test", 50) == 3556498 % 50
    assert partition_for("hello", 7) == 99162322 % 7
    negative = "Aa" * 7 + "zzzz"
    h = java_string_hash(negative)
    assert partition_for(negative, 50) == abs(h) % 50
