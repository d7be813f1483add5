"""A load test's rate profile: how many of the load-driving users run over time.

Scenario YAML (top level, beside ``workload:``)::

    load_shape:
      scaled: [transactional_producer]     # user kinds the stages scale (default)
      stages:
        - {kind: ramp, duration: 20, to: 1.0}    # from the level before (0 at the start)
        - {kind: steady, duration: 60}           # hold the level (or set one: level: 0.5)
        - {kind: spike, duration: 10, to: 3.0}   # jump to 3x at once, then back
        - {kind: steady, duration: 30}

A level multiplies the ``count`` of every scaled user spec (1.0: the workload as written);
the other users (consumers, copiers) run their fixed counts throughout. After the last stage
the level holds until the run ends. locust drives it (:mod:`.runner`'s ``LoadTestShape``);
this module imports no locust, so the scenario layer validates a shape without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import Field, model_validator

from .spec import SpecModel

if TYPE_CHECKING:
    from .config import WorkloadConfig

#: The largest level a stage may ask for (a multiple of the scaled users' counts).
MAX_LEVEL = 100.0

Level = Annotated[float, Field(ge=0, le=MAX_LEVEL)]
StageSeconds = Annotated[float, Field(gt=0, le=7 * 24 * 3600)]


class RampStage(SpecModel):
    """Linearly from the level before to ``to`` over ``duration`` seconds."""

    kind: Literal["ramp"]
    duration: StageSeconds
    to: Level


class SteadyStage(SpecModel):
    """Hold ``level`` (default: the level before) for ``duration`` seconds."""

    kind: Literal["steady"]
    duration: StageSeconds
    level: Level | None = None


class SpikeStage(SpecModel):
    """Jump to ``to`` at once, hold it ``duration`` seconds, then drop back to the level before."""

    kind: Literal["spike"]
    duration: StageSeconds
    to: Level


Stage = Annotated[RampStage | SteadyStage | SpikeStage, Field(discriminator="kind")]


def _transactional_producers() -> list[str]:
    """The default scaled kind, named by its own module (imported only when needed)."""
    from .kinds.transactional_producer import KIND

    return [KIND.name]


class LoadShape(SpecModel):
    #: The user kinds whose counts the levels multiply.
    scaled: Annotated[list[str], Field(default_factory=_transactional_producers, min_length=1)]
    stages: Annotated[list[Stage], Field(min_length=1, max_length=1000)]

    @model_validator(mode="after")
    def _first_level_known(self) -> LoadShape:
        first = self.stages[0]
        if isinstance(first, SteadyStage) and first.level is None:
            raise ValueError(
                "stages.0 (steady): the first stage has no level before it to hold; give "
                "it a level (1.0: the workload's counts) or start with a ramp"
            )
        return self

    def duration(self) -> float:
        """Seconds until the last stage ends."""
        return sum(s.duration for s in self.stages)

    def level_at(self, t: float) -> float:
        """The level ``t`` seconds after the start (the last level once the stages are over)."""
        level, start = 0.0, 0.0
        for stage in self.stages:
            end = start + stage.duration
            if isinstance(stage, RampStage):
                if t < end:
                    return level + (stage.to - level) * max(0.0, t - start) / stage.duration
                level = stage.to
            elif isinstance(stage, SteadyStage):
                level = level if stage.level is None else stage.level
                if t < end:
                    return level
            elif t < end:  # a spike: its level while it lasts, the level before after it
                return stage.to
            start = end
        return level

    def cut(self, duration: float) -> LoadShape:
        """The shape as a run of ``duration`` seconds runs it: the stages after its end
        dropped, the stage it ends in shortened (a ramp to the level it reaches by then)."""
        stages: list[RampStage | SteadyStage | SpikeStage] = []
        start = 0.0
        for stage in self.stages:
            if start >= duration:
                break
            kept = min(stage.duration, duration - start)
            update: dict[str, float] = {"duration": kept}
            if isinstance(stage, RampStage) and kept < stage.duration:
                update["to"] = self.level_at(start + kept)
            stages.append(stage.model_copy(update=update))
            start += stage.duration
        return self.model_copy(update={"stages": stages})

    def peak_level(self) -> float:
        """The highest level any stage reaches."""
        return max(self.level_at(0.0), *(self._stage_top(s) for s in self.stages), 0.0)

    @staticmethod
    def _stage_top(stage: RampStage | SteadyStage | SpikeStage) -> float:
        if isinstance(stage, SteadyStage):
            return stage.level or 0.0
        return stage.to

    def problem_with(self, workload: WorkloadConfig, duration: float) -> str | None:
        """What is wrong with this shape for ``workload`` run ``duration`` seconds, or None."""
        from .kinds.registry import KINDS

        known = sorted(k.name for k in KINDS)
        for kind in self.scaled:
            if kind not in known:
                return f"load_shape.scaled: unknown user kind {kind!r} (known: {', '.join(known)})"
        if not any(u.kind in self.scaled and u.count > 0 for u in workload.users):
            return (
                f"load_shape.scaled: the workload has no user of kind "
                f"{' or '.join(self.scaled)} for the stages to scale"
            )
        if self.duration() > duration:
            return (
                f"load_shape: its stages last {self.duration():g}s, longer than the run's "
                f"duration ({duration:g}s)"
            )
        peak = self.users_at_level(workload, self.peak_level())
        if peak > 10_000:
            return f"load_shape: its peak runs {peak} users (at most 10000)"
        return None

    def scaled_count(self, workload: WorkloadConfig) -> int:
        """The scaled users' total count as the workload writes it (level 1.0)."""
        return sum(u.count for u in workload.users if u.kind in self.scaled)

    def users_at_level(self, workload: WorkloadConfig, level: float) -> int:
        """Every user running at ``level``: the fixed ones and the scaled ones multiplied."""
        fixed = sum(u.count for u in workload.users if u.kind not in self.scaled)
        return fixed + round(level * self.scaled_count(workload))
