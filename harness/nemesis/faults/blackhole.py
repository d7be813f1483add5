"""``blackhole``: a link delivers nothing (proxy rule ``blackhole``)."""

from __future__ import annotations

from ...faults.proxy.rules import BlackholeRule
from .proxy_rule import ProxyRuleFault


class BlackholeFault(ProxyRuleFault):
    name = "blackhole"
    parameters = BlackholeRule
