"""``drop_request``: a request never reaches the node (proxy rule ``drop_request``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import DropRequestRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class DropRequestFault(ProxyRuleFault):
    name = "drop_request"
    parameters = DropRequestRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        return {"nth": 1}  # one frame, then the rule is spent
