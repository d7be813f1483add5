"""``throttle``: a link's bandwidth is limited (proxy rule ``throttle``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import ThrottleRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class ThrottleFault(ProxyRuleFault):
    name = "throttle"
    parameters = ThrottleRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        return {"bytes_per_second": rng.choice([10_000, 100_000, 1_000_000])}
