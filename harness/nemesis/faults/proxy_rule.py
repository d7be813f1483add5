"""Faults that are fault-proxy rules, installed at ``at`` and removed at ``at + duration``
(the proxy logs each application itself)."""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from ...faults.proxy.rules import FrameRuleBase, RuleBase, parse_rule
from .base import Family, FaultBase, FaultContext, TargetField

if TYPE_CHECKING:
    from ..schedule import RandomNemesis, ScheduledFault, Targets, TimedAction


class ProxyRuleFault(FaultBase):
    """A proxy rule kind as a fault; ``parameters`` is its rule model."""

    family: Family = "proxy_rule"
    targets: TargetField = "links"
    parameters: type[RuleBase]
    heals: bool = True

    def check_action(self, action: TimedAction) -> None:
        if "kind" in action.rule or "window" in action.rule:
            raise ValueError("`rule` must not set `kind` or `window`: the schedule does")
        try:
            self.parameters.model_validate({**action.rule, "kind": self.name})
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'rule'}: {e['msg']}" for e in exc.errors()
            )
            raise ValueError(f"`rule` of a {self.name} action: {problems}") from None

    def random_target(
        self, rng: random.Random, gen: RandomNemesis, targets: Targets
    ) -> dict[str, Any]:
        rule: dict[str, Any] = {"link": rng.choice(sorted(targets.links))}
        if issubclass(self.parameters, FrameRuleBase) and gen.apis:
            rule["api"] = list(gen.apis)
        rule.update(self.random_parameters(rng, gen))
        return {"rule": rule}

    def random_parameters(self, rng: random.Random, gen: RandomNemesis) -> dict[str, Any]:
        """The rule's own fields for a random fault (beyond ``link`` and ``api``)."""
        return {}

    def apply(self, context: FaultContext, index: int, fault: ScheduledFault) -> None:
        fleet = context.handle.fleet
        if fleet is None:
            raise RuntimeError("this cluster runs without fault proxies")
        started = time.time()
        # the rule id names the action, so the report groups its records under it
        fields = {"id": f"action-{index}", **fault.rule, "kind": self.name}
        rule = fleet.add_rule(parse_rule(fields))
        context.activate(index, fault, started, rule.id, f"{self.name} on {fault.rule.get('link')}")

    def heal(self, context: FaultContext, undo: Any) -> None:
        if context.handle.fleet is not None:
            context.handle.fleet.remove_rule(undo)
