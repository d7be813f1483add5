"""Per-log configuration, named after Kafka's topic configs."""

from __future__ import annotations

from dataclasses import dataclass

GIB = 1024**3


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = GIB  # segment.bytes
    segment_ms: int | None = None  # segment.ms (None: roll by size only)
    retention_ms: int = 7 * 24 * 3600 * 1000  # retention.ms, -1 = infinite
    retention_bytes: int = -1  # retention.bytes, -1 = infinite
    index_interval_bytes: int = 4096  # index.interval.bytes
    max_message_bytes: int = 1048588  # max.message.bytes (1 MiB + record overhead)
    # message.timestamp.before.max.ms / after.max.ms: how far a record's CreateTime may lie
    # behind / ahead of the broker's clock (Kafka 4.x defaults)
    timestamp_before_max_ms: int = 2**63 - 1
    timestamp_after_max_ms: int = 3_600_000

    def __post_init__(self) -> None:
        if not 14 <= self.segment_bytes <= 2**31 - 1:
            # Positions in the offset index are int32, as in Kafka.
            raise ValueError(f"segment_bytes must be in [14, 2^31-1], got {self.segment_bytes}")
        if self.index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must be >= 0")
        if self.segment_ms is not None and self.segment_ms <= 0:
            raise ValueError("segment_ms must be positive or None")
