"""``duplicate``: the node gets a request twice (proxy rule ``duplicate``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import DuplicateRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class DuplicateFault(ProxyRuleFault):
    name = "duplicate"
    parameters = DuplicateRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        return {"nth": 1}  # one frame, then the rule is spent
