"""``crash_consumer``: a consumer killed mid-poll."""

from __future__ import annotations

from .client_crash import ClientCrashFault


class CrashConsumerFault(ClientCrashFault):
    name = "crash_consumer"
