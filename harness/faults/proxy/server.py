"""The proxy fleet: one :class:`LinkProxy` per link, the installed rules, the fault log.

Usage (inside a running event loop)::

    fleet = await ProxyFleet(fault_log=run_dir / "faults.jsonl", seed=42).start()
    c1 = await fleet.add_link("client->n1", ("127.0.0.1", node1_port))
    await fleet.add_link("n1->n2", ("127.0.0.1", node2_port))   # n1 reaches n2 through it
    c1.address                                                   # ("127.0.0.1", port) to advertise
    rule = fleet.add_rule({"kind": "delay", "link": "client->*", "api": "Produce", "ms": 100})
    fleet.remove_rule(rule.id)
    fleet.heal_all()
    await fleet.close()

For a cluster the harness does not control, :meth:`ProxyFleet.external` puts proxies
in front of its bootstrap servers and rewrites broker addresses in responses, so that
each broker (node id, host, port) a client learns about gets its own proxy.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ....rundir.fault_log import FaultLog
from .link import LinkProxy
from .rewrite import Resolve
from .rules import (
    NO_FAULTS,
    LinkPolicy,
    RuleState,
    compute_policy,
    parse_rule,
    rule_rng,
)

Address = tuple[str, int]


def parse_address(value: str | Address) -> Address:
    if isinstance(value, tuple):
        return value[0], int(value[1])
    host, _, port = value.rpartition(":")
    return host.strip("[]"), int(port)


class ProxyFleet:
    """All proxies of a run, and the nemesis's handle on them."""

    def __init__(
        self,
        *,
        fault_log: FaultLog | str | Path | None = None,
        seed: int | str | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        if fault_log is not None and not isinstance(fault_log, FaultLog):
            fault_log = FaultLog(fault_log)
        self.fault_log: FaultLog | None = fault_log
        self.seed = seed
        self.host = host
        self.origin = time.time()
        self.links: dict[str, LinkProxy] = {}
        self.rules_version = 0
        self._states: dict[str, RuleState] = {}
        self._timers: dict[str, list[asyncio.TimerHandle]] = {}
        self._spans: dict[tuple[str, str], tuple[float, Any]] = {}  # (rule id, link) -> start
        self.faults_recorded = 0
        #: node id -> how many times its process was replaced (killed, restarted) so far
        self.incarnations: dict[int, int] = {}
        self._closed = False

    async def start(self) -> ProxyFleet:
        """Mark the fleet's time origin (relative rule windows count from here)."""
        self.origin = time.time()
        return self

    async def __aenter__(self) -> ProxyFleet:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ links

    async def add_link(
        self,
        name: str,
        upstream: str | Address | None,
        *,
        port: int = 0,
        host: str | None = None,
        resolve: Resolve | None = None,
    ) -> LinkProxy:
        """Start a proxy for one link. ``upstream`` may be None and set later
        (``link.set_upstream``) when the proxy address must be known first. It listens on
        ``host`` (default: the fleet's) and ``port`` (0: one the kernel picks)."""
        if name in self.links:
            raise ValueError(f"link {name!r} exists")
        up = parse_address(upstream) if upstream is not None else None
        link = LinkProxy(self, name, up, resolve=resolve)
        await link.start(host or self.host, port)
        self.links[name] = link
        self._refresh()
        return link

    async def add_links(self, links: dict[str, str | Address | None]) -> dict[str, LinkProxy]:
        return {name: await self.add_link(name, up) for name, up in links.items()}

    def link(self, name: str) -> LinkProxy:
        return self.links[name]

    async def remove_link(self, name: str) -> None:
        link = self.links.pop(name)
        self._refresh()
        await link.close()

    async def external(
        self, bootstrap: Iterable[str | Address], prefix: str = "client->"
    ) -> ExternalCluster:
        """Proxies in front of a cluster the harness does not run (address rewriting on)."""
        cluster = ExternalCluster(self, prefix)
        for i, addr in enumerate(bootstrap):
            await cluster.add_bootstrap(i, parse_address(addr))
        return cluster

    # ------------------------------------------------------------------ incarnations

    def new_incarnation(self, node_id: int) -> int:
        """Node ``node_id``'s process is being replaced (killed, or restarted): the
        connections it opens from now on are a new incarnation's. Returns its number."""
        self.incarnations[node_id] = self.incarnations.get(node_id, 0) + 1
        return self.incarnations[node_id]

    def source_incarnation(self, link: str) -> tuple[int, int] | None:
        """The node link ``link`` leads from (``1001`` of ``n1001->n1``) and its incarnation
        now; None for a client's link."""
        source = link.split("->", 1)[0]
        if len(source) < 2 or source[0] != "n" or not source[1:].isdigit():
            return None
        node = int(source[1:])
        return node, self.incarnations.get(node, 0)

    # ------------------------------------------------------------------ rules

    def add_rule(self, rule: Any) -> Any:
        """Validate and install a rule (a model or a dict); returns the rule model."""
        rule = parse_rule(rule)
        if rule.id in self._states:
            raise ValueError(f"rule id {rule.id!r} is already installed")
        state = RuleState(rule, self.origin, rule_rng(rule, self.seed))
        self._states[rule.id] = state
        self._schedule(state)
        self._refresh()
        return rule

    def add_rules(self, rules: Iterable[Any]) -> list[Any]:
        return [self.add_rule(r) for r in rules]

    def remove_rule(self, rule_id: str) -> bool:
        state = self._states.pop(rule_id, None)
        if state is None:
            return False
        self._retire(state)
        self._refresh()
        return True

    def heal_all(self) -> int:
        """Remove every rule, release held frames, end delays; returns how many rules."""
        states = list(self._states.values())
        self._states.clear()
        for state in states:
            self._retire(state)
        self._refresh()
        return len(states)

    def rules(self) -> list[Any]:
        return [st.rule for st in self._states.values()]

    def rule_states(self) -> list[RuleState]:
        return list(self._states.values())

    def rule_state(self, rule_id: str) -> RuleState:
        return self._states[rule_id]

    def policy_for(self, link: str) -> LinkPolicy:
        if not self._states:
            return NO_FAULTS
        return compute_policy(self._states.values(), link, time.time())

    def _retire(self, state: RuleState) -> None:
        state.removed.set()
        for timer in self._timers.pop(state.rule.id, []):
            timer.cancel()
        state.release_held("rule removed")

    def _schedule(self, state: RuleState) -> None:
        """Re-evaluate link policies when the rule's window opens and closes."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        now = time.time()
        timers = []
        for at in (state.lo, state.hi):
            if now < at < float("inf"):
                timers.append(loop.call_later(at - now + 0.002, self._refresh))
        self._timers[state.rule.id] = timers

    def _refresh(self) -> None:
        """Rules or windows changed: new policies, link-fault spans, resets."""
        self.rules_version += 1
        now = time.time()
        active: dict[tuple[str, str], Any] = {}
        for st in self._states.values():
            if st.rule.logs_spans and st.active(now):
                for name in self.links:
                    if st.rule.matches_link(name):
                        active[(st.rule.id, name)] = st.rule
        for key in active.keys() - self._spans.keys():
            self._spans[key] = (now, active[key])
        for key in list(self._spans.keys() - active):
            self._end_span(key, now)
        for link in list(self.links.values()):
            link.refresh()

    def _end_span(self, key: tuple[str, str], now: float) -> None:
        start, rule = self._spans.pop(key)
        target = {"direction": rule.direction}
        self.record_fault(rule.kind, start, now, key[1], target, rule.params())

    # ------------------------------------------------------------------ fault log

    def record_fault(
        self,
        kind: str,
        start: float,
        end: float,
        link: str | None,
        target: dict[str, Any],
        params: dict[str, Any],
    ) -> None:
        self.faults_recorded += 1
        if self.fault_log is not None:
            self.fault_log.write(kind, start, end, link=link, target=target, params=params)

    # ------------------------------------------------------------------ status

    def describe(self) -> dict[str, Any]:
        """A JSON-able snapshot: links (address, upstream, counters) and rules."""
        return {
            "links": {
                name: {
                    "listen": "{}:{}".format(*link.address),
                    "upstream": "{}:{}".format(*link.upstream) if link.upstream else None,
                    "stats": vars(link.stats).copy(),
                }
                for name, link in self.links.items()
            },
            "rules": [r.to_yaml_dict() for r in self.rules()],
        }

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.heal_all()
        links = list(self.links.values())
        self.links.clear()
        for link in links:
            with contextlib.suppress(Exception):
                await link.close()
        if self.fault_log is not None:
            self.fault_log.close()


class ExternalCluster:
    """Client-side proxies for an external cluster; brokers get proxies on first sight."""

    def __init__(self, fleet: ProxyFleet, prefix: str) -> None:
        self.fleet = fleet
        self.prefix = prefix
        self.bootstrap_links: list[LinkProxy] = []
        self.broker_links: dict[tuple[int, str, int], LinkProxy] = {}
        self._lock = asyncio.Lock()

    async def add_bootstrap(self, index: int, upstream: Address) -> LinkProxy:
        link = await self.fleet.add_link(
            f"{self.prefix}bootstrap{index}", upstream, resolve=self.resolve
        )
        self.bootstrap_links.append(link)
        return link

    @property
    def bootstrap_servers(self) -> str:
        return ",".join(link.bootstrap for link in self.bootstrap_links)

    def _own_address(self, host: str, port: int) -> bool:
        return any(link.address == (host, port) for link in self.fleet.links.values())

    async def resolve(self, node_id: int, host: str, port: int) -> Address:
        """The proxy address standing in for broker (node_id, host, port)."""
        key = (node_id, host, port)
        link = self.broker_links.get(key)
        if link is not None:
            return link.address
        if self._own_address(host, port):
            return host, port
        async with self._lock:
            link = self.broker_links.get(key)
            if link is None:
                name = f"{self.prefix}node{node_id}"
                if name in self.fleet.links:
                    name = f"{name}@{host}:{port}"
                link = await self.fleet.add_link(name, (host, port), resolve=self.resolve)
                self.broker_links[key] = link
        return link.address

    def links(self) -> list[LinkProxy]:
        return [*self.bootstrap_links, *self.broker_links.values()]
