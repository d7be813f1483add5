"""``strip_partition``: a WriteTxnMarkers request reaches the node without one partition, so
the node's answer leaves it out (proxy rule ``strip_partition``)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import StripPartitionRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class StripPartitionFault(ProxyRuleFault):
    name = "strip_partition"
    parameters = StripPartitionRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        # the only API it strips, whatever the generator's API list; one frame, then spent
        return {"api": ["WriteTxnMarkers"], "nth": 1}
