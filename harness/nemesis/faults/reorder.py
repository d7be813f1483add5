"""``reorder``: a later request overtakes an earlier one (proxy rule ``reorder``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import ReorderRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class ReorderFault(ProxyRuleFault):
    name = "reorder"
    parameters = ReorderRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        return {"max_hold_ms": rng.randint(50, 1000)}
