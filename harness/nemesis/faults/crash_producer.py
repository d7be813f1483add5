"""``crash_producer``: a producer killed mid-transaction, without aborting."""

from __future__ import annotations

from .client_crash import ClientCrashFault


class CrashProducerFault(ClientCrashFault):
    name = "crash_producer"
