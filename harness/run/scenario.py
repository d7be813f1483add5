"""Scenario files: one YAML document describing a whole run.

Shape::

    name: smoke                      # required; names the run directory
    description: ...
    seed: 1                          # --seed overrides
    duration: 60                     # seconds of workload (--duration overrides)
    cluster:
      launcher: local                # local | docker | external (--launcher overrides)
      brokers: 2
      coordinators: 1
      proxied: true                  # a fault proxy on every link
      bootstrap: null                # external clusters (--bootstrap overrides)
      settings: {transaction.max.timeout.ms: 60000}
    workload: {...}                  # harness/workload/config.py
    nemesis:                         # harness/nemesis/schedule.py
      actions: [{at: 10, kind: kill, node: 2, duration: 5}]
      random: {mix: {delay: 3, kill: 1}, intensity: 6}
    final:
      quiescence_timeout: 60         # wait this long for open transactions to finish
      read_timeout: 120
    expect:
      verdict: valid                 # what a correct cluster gives (invalid: a bug repro)

Every model forbids unknown keys; :func:`load_scenario` reports every problem with
the path of the field (``cluster.brokers: Input should be greater than or equal to 1``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ...cluster.cpu_placement import parse_cpu_list
from ..nemesis.schedule import NemesisConfig
from ..workload.config import WorkloadConfig

CRASHABLE_PRODUCERS = {"transactional_producer", "idempotent_producer"}
CRASHABLE_CONSUMERS = {"read_committed_consumer", "eos_copier"}


class ScenarioError(ValueError):
    """The scenario file is missing, unreadable or invalid; the message says where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClusterConfig(_Model):
    launcher: Literal["local", "docker", "external"] = "local"
    brokers: int = Field(default=2, ge=1, le=32)
    coordinators: int = Field(default=1, ge=0, le=16)
    proxied: bool = True
    bootstrap: str | None = None
    settings: dict[str, str | int | bool] = Field(default_factory=dict)
    cpus: str | None = Field(
        default=None,
        description="run every node on these CPUs, batch-scheduled (a CPU list such as 1 or "
        "0-1,4; see `cluster up --cpus`); the docker launcher also sets the containers' cpuset",
    )

    @field_validator("cpus")
    @classmethod
    def _cpu_list(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cpu_list(value)  # its CpuListError (a ValueError) names the problem
        return value

    def setting_pairs(self) -> list[str]:
        def render(v: str | int | bool) -> str:
            return ("true" if v else "false") if isinstance(v, bool) else str(v)

        return [f"{k}={render(v)}" for k, v in sorted(self.settings.items())]


class FinalPhase(_Model):
    quiescence_timeout: float = Field(default=60.0, gt=0)
    read_timeout: float = Field(default=120.0, gt=0)


class Expectation(_Model):
    verdict: Literal["valid", "invalid"] = "valid"
    anomalies: list[str] = Field(
        default_factory=list, description="checkers expected to report anomalies (bug repros)"
    )


class Scenario(_Model):
    name: str = Field(pattern=r"^[A-Za-z0-9._-]+$", max_length=100)
    description: str = ""
    seed: int = 1
    duration: float = Field(default=60.0, gt=0, le=7 * 24 * 3600)
    cluster: ClusterConfig = Field(default_factory=ClusterConfig)
    workload: WorkloadConfig
    nemesis: NemesisConfig = Field(default_factory=NemesisConfig)
    final: FinalPhase = Field(default_factory=FinalPhase)
    expect: Expectation = Field(default_factory=Expectation)

    @model_validator(mode="after")
    def _client_faults_have_clients(self) -> Scenario:
        kinds = {u.kind for u in self.workload.users}
        faults = {a.kind for a in self.nemesis.actions}
        if self.nemesis.random is not None:
            faults |= {k for k, w in self.nemesis.random.mix.items() if w > 0}
        if "crash_producer" in faults and not kinds & CRASHABLE_PRODUCERS:
            raise ValueError(
                "nemesis crash_producer needs a transactional_producer or "
                "idempotent_producer user in the workload"
            )
        if "crash_consumer" in faults and not kinds & CRASHABLE_CONSUMERS:
            raise ValueError(
                "nemesis crash_consumer needs a read_committed_consumer or "
                "eos_copier user in the workload"
            )
        if self.cluster.launcher == "external" and not self.cluster.proxied:
            raise ValueError("cluster.proxied: an external cluster is always proxied")
        if self.cluster.cpus is not None and self.cluster.launcher == "external":
            raise ValueError("cluster.cpus: an external cluster's nodes are not the harness's")
        return self

    def transaction_timeout_ms(self) -> int:
        """The largest transaction.timeout.ms any user runs with (the analysis needs it)."""
        timeouts = [int(getattr(u, "transaction_timeout_ms", 0) or 0) for u in self.workload.users]
        return max(timeouts, default=0) or 60_000


def _format(err: ValidationError) -> str:
    lines = []
    for e in err.errors():
        path = ".".join(str(p) for p in e["loc"]) or "(top level)"
        lines.append(f"  {path}: {e['msg']}")
    return "\n".join(lines)


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a YAML mapping, got {type(data).__name__}")
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(f"{source} is invalid:\n{_format(err)}") from None


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc.strerror or exc}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path} is not valid YAML{where}: {problem}") from None
    return parse_scenario(data, str(path))
