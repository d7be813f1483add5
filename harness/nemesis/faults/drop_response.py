"""``drop_response``: the node answers, the client never hears (proxy rule ``drop_response``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import DropResponseRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class DropResponseFault(ProxyRuleFault):
    name = "drop_response"
    parameters = DropResponseRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        return {"nth": 1}  # one frame, then the rule is spent
