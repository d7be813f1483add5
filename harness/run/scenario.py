"""Scenario files: one YAML document describing a whole run.

Shape::

    name: smoke                      # required; names the run directory
    description: ...
    seed: 1                          # --seed overrides
    duration: 60                     # seconds of workload (--duration overrides)
    cluster:
      launcher: local                # local | docker | external | kafka (--launcher overrides)
      flavour: txnchaos              # docker only: txnchaos | apache-kafka (--flavour overrides)
      kafka_version: 4.4.0           # the Apache Kafka release (kafka launcher or flavour)
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
    load_shape: {...}                # load tests: users over time, harness/workload/load_shape.py
    repro: {...}                     # bug reproductions only: harness/repro/spec.py

Every model forbids unknown keys; :func:`load_scenario` reports every problem, on one line,
with the path of the field and the value found (``cluster.brokers: Input should be greater
than or equal to 1 (got 0)``).
"""

from __future__ import annotations

import math
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
from ...cluster.settings import render_setting
from ..launch.metrics_urls import metrics_url_problem
from ..nemesis.schedule import NemesisConfig, no_room
from ..repro.spec import ReproSpec
from ..workload.config import WorkloadConfig
from ..workload.kinds.registry import crash_faults, crash_targets
from ..workload.load_shape import LoadShape


class ScenarioError(ValueError):
    """The scenario file is missing, unreadable or invalid; the message says where."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ClusterConfig(_Model):
    launcher: Literal["local", "docker", "external", "kafka"] = "local"
    flavour: Literal["txnchaos", "apache-kafka"] = Field(
        default="txnchaos",
        description="what the docker launcher runs: the project's nodes or Apache Kafka's "
        "(--flavour overrides; the kafka launcher always runs Apache Kafka)",
    )
    kafka_version: str | None = Field(
        default=None,
        pattern=r"^\d+\.\d+\.\d+$",
        description="the Apache Kafka release the kafka launcher runs (--kafka-version "
        "overrides; default: the launcher's, docs/apache-kafka.md)",
    )
    brokers: int = Field(default=2, ge=1, le=32)
    coordinators: int = Field(default=1, ge=0, le=16)
    proxied: bool = True
    bootstrap: str | None = None
    metrics: dict[int, str] = Field(
        default_factory=dict,
        description="an external cluster's Prometheus /metrics URL per node id (--metrics-url "
        "overrides): the harness scrapes them and the metrics checker judges them",
    )
    settings: dict[str, str | int | bool] = Field(default_factory=dict)
    cpus: str | None = Field(
        default=None,
        description="run every node on these CPUs, batch-scheduled (a CPU list such as 1 or "
        "0-1,4; see `cluster up --cpus`); the docker launcher also sets the containers' cpuset",
    )

    @field_validator("metrics")
    @classmethod
    def _metrics_urls(cls, value: dict[int, str]) -> dict[int, str]:
        for node, url in value.items():
            problem = metrics_url_problem(node, url)
            if problem:
                raise ValueError(problem)
        return value

    @field_validator("cpus")
    @classmethod
    def _cpu_list(cls, value: str | None) -> str | None:
        if value is not None:
            parse_cpu_list(value)  # its CpuListError (a ValueError) names the problem
        return value

    def setting_pairs(self) -> list[str]:
        return [f"{k}={render_setting(v)}" for k, v in sorted(self.settings.items())]


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
    repro: ReproSpec | None = Field(
        default=None, description="a reproduction's catalogue entry (scenarios/repro/)"
    )
    load_shape: LoadShape | None = Field(
        default=None, description="a load test's rate profile (ramp, steady, spike stages)"
    )

    @model_validator(mode="after")
    def _client_faults_have_clients(self) -> Scenario:
        kinds = {u.kind for u in self.workload.users}
        faults = {a.kind for a in self.nemesis.actions}
        if self.nemesis.random is not None:
            faults |= {k for k, w in self.nemesis.random.mix.items() if w > 0}
        for fault in crash_faults():
            crashable = [kind for kind, _hold in crash_targets(fault)]
            if fault in faults and not kinds & set(crashable):
                *others, last = crashable
                one_of = f"{', '.join(others)} or {last}" if others else last
                raise ValueError(f"nemesis {fault} needs a {one_of} user in the workload")
        on = self.cluster.launcher
        if self.cluster.flavour == "apache-kafka" and on in ("local", "external"):
            raise ValueError(
                f"cluster.flavour: apache-kafka runs on the kafka or docker launcher, not {on}"
            )
        if self.cluster.launcher == "external" and not self.cluster.proxied:
            raise ValueError("cluster.proxied: an external cluster is always proxied")
        if self.cluster.metrics and self.cluster.launcher != "external":
            raise ValueError("cluster.metrics: only an external cluster's metrics URLs are given")
        if self.cluster.cpus is not None and self.cluster.launcher == "external":
            raise ValueError("cluster.cpus: an external cluster's nodes are not the harness's")
        if self.load_shape is not None:
            problem = self.load_shape.problem_with(self.workload, self.duration)
            if problem:
                raise ValueError(problem)
        return self

    def transaction_timeout_ms(self) -> int:
        """The largest transaction.timeout.ms any user runs with (the analysis needs it)."""
        timeouts = [int(getattr(u, "transaction_timeout_ms", 0) or 0) for u in self.workload.users]
        return max(timeouts, default=0) or 60_000


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _format(err: ValidationError) -> str:
    """Every problem on one line: ``path: message (got value)``, separated by ``; ``."""
    problems = []
    for e in err.errors():
        path = ".".join(str(p) for p in e["loc"]) or "(top level)"
        value = e.get("input")
        got = f" (got {_shown(value)})" if isinstance(value, str | int | float | bool) else ""
        msg = e["msg"].removeprefix("Value error, ")
        problems.append(f"{path}: {msg}{got}")
    return "; ".join(problems)


def _non_finite(data: Any, path: str = "") -> str | None:
    """The path of the first NaN or infinity in ``data`` (YAML's .nan/.inf), or None: no
    duration, rate or timeout is meaningful as one, and some checks compare them away."""
    if isinstance(data, float) and not math.isfinite(data):
        return path or "(top level)"
    items: Any = ()
    if isinstance(data, dict):
        items = data.items()
    elif isinstance(data, list):
        items = enumerate(data)
    for key, value in items:
        found = _non_finite(value, f"{path}.{key}" if path else str(key))
        if found is not None:
            return found
    return None


def parse_scenario(data: Any, source: str = "scenario") -> Scenario:
    if not isinstance(data, dict):
        raise ScenarioError(f"{source}: a scenario is a YAML mapping, got {type(data).__name__}")
    try:
        bad = _non_finite(data)
        if bad is not None:
            raise ScenarioError(f"{source} is invalid: {bad}: a finite number is needed")
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(f"{source} is invalid: {_format(err)}") from None
    except RecursionError:  # a YAML alias inside itself (&a [*a]) or absurd nesting
        problem = "it refers to itself or nests too deeply"
        raise ScenarioError(f"{source} is invalid: {problem}") from None


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ScenarioError(f"cannot read scenario {path}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(
            f"{path} is not a YAML text file: byte 0x{raw[exc.start]:02x} at offset {exc.start} "
            "is not UTF-8"
        ) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ScenarioError(f"{path} is not valid YAML{where}: {problem}") from None
    except RecursionError:  # deeply nested flow collections
        raise ScenarioError(f"{path} is not valid YAML: nested too deeply") from None
    return parse_scenario(data, str(path))


def fault_outlasting_workload(
    scenario: Scenario, source: str | Path, duration: float | None = None
) -> str | None:
    """Why the scenario cannot run (an explicit fault that heals after the workload ends,
    with ``duration`` overriding the scenario's), or None; checked before a cluster starts."""
    workload = duration or scenario.duration
    where = f"--duration {workload:g}" if duration else f"duration {workload:g}"
    for i, action in enumerate(scenario.nemesis.actions):
        if action.at + action.duration > workload:
            return (
                f"{source}: nemesis.actions.{i} ({action.kind} at {action.at:g}s lasting "
                f"{action.duration:g}s) ends after the workload ({where}s): faults must heal "
                "before the final phase"
            )
    if scenario.nemesis.random is not None:
        problem = no_room(scenario.nemesis.random, workload)
        if problem:
            return f"{source}: {problem} ({where}s)"
    return None


def scenario_as_run(
    scenario: Scenario,
    seed: int,
    duration: float,
    launcher: str,
    kafka_version: str | None = None,
    flavour: str | None = None,
) -> str:
    """The scenario as YAML with the command line's overrides applied (what a run
    directory keeps as scenario.yaml); parsing it gives the scenario that ran."""
    data = scenario.model_dump(mode="json", exclude_none=True)
    data["seed"], data["duration"] = seed, duration
    if scenario.load_shape is not None:  # a shorter run cuts the shape where it ends
        data["load_shape"] = scenario.load_shape.cut(duration).model_dump(mode="json")
    data.setdefault("cluster", {})["launcher"] = launcher
    if kafka_version is not None:
        data["cluster"]["kafka_version"] = kafka_version
    if flavour is not None:
        data["cluster"]["flavour"] = flavour
    return yaml.safe_dump(data, sort_keys=False)
