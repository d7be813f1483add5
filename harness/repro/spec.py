"""The ``repro:`` block of a scenario file: what the reproduction recreates and what
each configuration predicts."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Prediction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    verdict: Literal["valid", "invalid"]
    anomalies: list[str] = Field(
        default_factory=list,
        description="checkers that must report anomalies (an invalid verdict from other "
        "checkers alone does not count as the bug detected)",
    )

    @model_validator(mode="after")
    def _anomalies_need_invalid(self) -> Prediction:
        if self.anomalies and self.verdict == "valid":
            raise ValueError("a valid prediction names no anomalies")
        return self


class Configuration(BaseModel):
    """One way to run the reproduction: settings added to the scenario's cluster."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    settings: dict[str, str | int | bool] = Field(default_factory=dict)
    expect: Prediction


class ReproSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    report: str = Field(min_length=1, description="the public bug report, e.g. KAFKA-9144")
    design_section: str = Field(min_length=1, description="the design document (KIP) and section")
    symptom: str = Field(min_length=1, description="what a user of the broken cluster sees")
    configurations: dict[str, Configuration] = Field(min_length=1)
    configuration: str | None = Field(
        default=None,
        description="set by `txnchaos repro` in the scenario it runs: which configuration "
        "this run is (its report names it, and what the defended ones would have done)",
    )

    @model_validator(mode="after")
    def _names(self) -> ReproSpec:
        if self.configuration is not None and self.configuration not in self.configurations:
            names = ", ".join(self.configurations)
            raise ValueError(f"configuration {self.configuration!r} is not one of {names}")
        for name in self.configurations:
            if not name.replace("-", "").replace("_", "").isalnum():
                raise ValueError(f"configuration name {name!r}: letters, digits, - and _ only")
        if not any(c.expect.verdict == "invalid" for c in self.configurations.values()):
            raise ValueError("a reproduction needs a configuration where the bug is present")
        return self
