"""On-disk storage of partition logs: segments, sparse indexes, crash recovery."""

from .config import LogConfig
from .errors import OffsetOutOfRange, StorageError
from .log import PartitionLog
from .segment import LogSegment

__all__ = ["LogConfig", "LogSegment", "OffsetOutOfRange", "PartitionLog", "StorageError"]
