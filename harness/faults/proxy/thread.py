"""A :class:`ProxyFleet` on its own event-loop thread, driven by blocking calls.

For callers that are not asyncio code (tests with confluent-kafka clients, a
gevent-patched workload, a synchronous nemesis): every method runs the fleet call
on the fleet's loop and waits for its result.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Coroutine, Iterable
from pathlib import Path
from typing import Any, TypeVar

from ....rundir.fault_log import FaultLog
from .link import LinkProxy
from .server import Address, ExternalCluster, ProxyFleet

T = TypeVar("T")


class FleetThread:
    def __init__(
        self,
        *,
        fault_log: FaultLog | str | Path | None = None,
        seed: int | str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.timeout = timeout
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="proxy-fleet", daemon=True
        )
        self._thread.start()
        self.fleet: ProxyFleet = self._run(ProxyFleet(fault_log=fault_log, seed=seed).start())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(self.timeout)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        """Run a plain fleet method on the loop thread."""

        async def wrapper() -> T:
            return fn(*args)

        return self._run(wrapper())

    def add_link(
        self,
        name: str,
        upstream: str | Address | None,
        *,
        host: str | None = None,
        port: int = 0,
    ) -> LinkProxy:
        return self._run(self.fleet.add_link(name, upstream, host=host, port=port))

    def remove_link(self, name: str) -> None:
        self._run(self.fleet.remove_link(name))

    def external(
        self, bootstrap: Iterable[str | Address], prefix: str = "client->"
    ) -> ExternalCluster:
        return self._run(self.fleet.external(list(bootstrap), prefix))

    def add_rule(self, rule: Any) -> Any:
        return self.call(self.fleet.add_rule, rule)

    def remove_rule(self, rule_id: str) -> bool:
        return self.call(self.fleet.remove_rule, rule_id)

    def heal_all(self) -> int:
        return self.call(self.fleet.heal_all)

    def describe(self) -> dict[str, Any]:
        return self.call(self.fleet.describe)

    def close(self) -> None:
        try:
            self._run(self.fleet.close())
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self._thread.join(self.timeout)
            self.loop.close()

    def __enter__(self) -> FleetThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
