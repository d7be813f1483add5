"""The nemesis's fault kinds, one module per kind, and :data:`FAULTS`, the registry the
schedule generator, scenario validation and the executor take everything from.

Adding a kind: a module here with a class implementing :class:`~.base.Fault` (usually
by subclassing ``ProxyRuleFault``, ``ProcessFault`` or ``ClientCrashFault``) and an
entry in :data:`FAULTS`.
"""

from __future__ import annotations

from .base import Family, Fault, FaultContext, ScheduleError
from .blackhole import BlackholeFault
from .crash_consumer import CrashConsumerFault
from .crash_producer import CrashProducerFault
from .crash_writer_after_db_commit import CrashWriterAfterDbCommitFault
from .crash_writer_after_prepare import CrashWriterAfterPrepareFault
from .crash_writer_in_recovery import CrashWriterInRecoveryFault
from .delay import DelayFault
from .drop_request import DropRequestFault
from .drop_response import DropResponseFault
from .duplicate import DuplicateFault
from .kill import KillFault
from .pause import PauseFault
from .reorder import ReorderFault
from .reset import ResetFault
from .restart import RestartFault
from .stale_marker import StaleMarkerFault
from .strip_partition import StripPartitionFault
from .throttle import ThrottleFault
from .torn_write import TornWriteFault
from .zombie_producer import ZombieProducerFault

_KINDS: tuple[Fault, ...] = (
    # proxy rules
    DelayFault(),
    DropRequestFault(),
    DropResponseFault(),
    ReorderFault(),
    DuplicateFault(),
    StripPartitionFault(),
    StaleMarkerFault(),
    BlackholeFault(),
    ResetFault(),
    ThrottleFault(),
    # node processes
    KillFault(),
    PauseFault(),
    RestartFault(),
    TornWriteFault(),
    # clients
    CrashProducerFault(),
    CrashConsumerFault(),
    CrashWriterAfterPrepareFault(),
    CrashWriterAfterDbCommitFault(),
    CrashWriterInRecoveryFault(),
    ZombieProducerFault(),
)

FAULTS: dict[str, Fault] = {f.name: f for f in _KINDS}
"""Every fault kind by name (the registry)."""


__all__ = ["FAULTS", "Family", "Fault", "FaultContext", "ScheduleError"]
