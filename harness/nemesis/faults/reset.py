"""``reset``: a link's connections are reset and refused (proxy rule ``reset``)."""

from __future__ import annotations

from ...faults.proxy.rules import ResetRule
from .proxy_rule import ProxyRuleFault


class ResetFault(ProxyRuleFault):
    name = "reset"
    parameters = ResetRule
