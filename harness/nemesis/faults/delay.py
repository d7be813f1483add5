"""``delay``: matching frames wait before they go on (proxy rule ``delay``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import DelayRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class DelayFault(ProxyRuleFault):
    name = "delay"
    parameters = DelayRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        lo, hi = gen.delay_ms
        ms = rng.randint(lo, hi)
        return {"ms": ms, "jitter": "uniform", "jitter_ms": max(1, ms // 4)}
