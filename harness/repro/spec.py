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


#: the flavours of cluster a configuration runs on (run.json's ``cluster.flavour``)
OURS, APACHE_KAFKA = "txnchaos", "apache-kafka"


class Configuration(BaseModel):
    """One way to run the reproduction: the cluster it runs on (the project's own, or an
    Apache Kafka release) and settings added to the scenario's cluster."""

    model_config = ConfigDict(extra="forbid")

    description: str = ""
    kafka_version: str | None = Field(
        default=None,
        pattern=r"^\d+\.\d+\.\d+$",
        description="run on this Apache Kafka release (the kafka launcher) instead of the "
        "project's cluster; settings are then Kafka's own broker settings",
    )
    settings: dict[str, str | int | bool] = Field(default_factory=dict)
    expect: Prediction

    @property
    def flavour(self) -> str:
        return APACHE_KAFKA if self.kafka_version else OURS

    @property
    def cluster_text(self) -> str:
        """What the configuration runs on, as the table says it."""
        return f"Apache Kafka {self.kafka_version}" if self.kafka_version else "txnchaos"

    @model_validator(mode="after")
    def _kafka_settings(self) -> Configuration:
        if self.kafka_version:
            from ..launch.kafka.layout import settings_problem

            for name in self.settings:
                problem = settings_problem(name)
                if problem:
                    raise ValueError(problem)
        return self


class ReproSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    report: str = Field(min_length=1, description="the public bug report, e.g. KAFKA-9144")
    fixed_by: list[str] = Field(
        default_factory=list,
        description="the pull requests that fixed it, e.g. apache/kafka#15524",
    )
    affects: list[str] = Field(
        default_factory=list, description="the affected versions, as the report states them"
    )
    fixed_in: list[str] = Field(
        default_factory=list, description="the fix versions, as the report states them"
    )
    trigger: str = Field(
        default="",
        description="the smallest fault schedule and workload that trigger it, and why",
    )
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
            bare = name.replace("-", "").replace("_", "").replace(".", "")
            if not bare.isalnum() or not name[0].isalnum():
                raise ValueError(
                    f"configuration name {name!r}: letters, digits, -, _ and . only, "
                    "starting with a letter or digit"
                )
        if not any(c.expect.verdict == "invalid" for c in self.configurations.values()):
            raise ValueError("a reproduction needs a configuration where the bug is present")
        return self
