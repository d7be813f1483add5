"""Classic consumer-group coordination (JoinGroup/SyncGroup/Heartbeat/LeaveGroup) and
committed offsets (OffsetCommit/OffsetFetch), with pending transactional offsets
ready for TxnOffsetCommit. See ``rebalance.py`` for the state machine."""

from .config import GroupConfig
from .coordinator import FetchedOffset, GroupCoordinator, GroupSummary, StorageError
from .handlers import VERSIONS, GroupApis, register_group_apis
from .model import GroupState, JoinResult, SyncResult

__all__ = [
    "VERSIONS",
    "FetchedOffset",
    "GroupApis",
    "GroupConfig",
    "GroupCoordinator",
    "GroupState",
    "GroupSummary",
    "JoinResult",
    "StorageError",
    "SyncResult",
    "register_group_apis",
]
