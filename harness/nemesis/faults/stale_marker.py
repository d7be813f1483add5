"""``stale_marker``: copies of transaction markers delivered again once a broker must refuse
them (proxy rule ``stale_marker``: a TV2 marker while the producer's next transaction is
open, a marker of an older producer epoch, one a coordinator node sent before the harness
restarted or killed it, or one of an older coordinator epoch)."""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any

from ...faults.proxy.rules import StaleMarkerRule
from .proxy_rule import ProxyRuleFault

if TYPE_CHECKING:
    from ..schedule import RandomNemesis


class StaleMarkerFault(ProxyRuleFault):
    name = "stale_marker"
    parameters = StaleMarkerRule

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        # it reads markers and writes on every link, whatever the generator's API list
        return {"api": ["WriteTxnMarkers", "Produce"], "link": "*"}
