"""The catalogue: every scenario file with a ``repro:`` block in the catalogue
directory (``scenarios/repro/``), by name."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from ..run.scenario import Scenario, ScenarioError, load_scenario
from .spec import ReproSpec

#: the repository's catalogue, beside the package (an editable install, or a clone)
SHIPPED = Path(__file__).resolve().parents[2] / "scenarios" / "repro"


class CatalogueError(ValueError):
    """A missing catalogue, an unknown name or an invalid entry: exit code 2."""


@dataclass(frozen=True)
class Entry:
    name: str
    path: Path
    scenario: Scenario

    @property
    def spec(self) -> ReproSpec:
        assert self.scenario.repro is not None
        return self.scenario.repro


def default_directory() -> Path:
    local = Path("scenarios/repro")
    return local if local.is_dir() else SHIPPED


def load_catalogue(directory: Path | None = None) -> dict[str, Entry]:
    where = directory or default_directory()
    if not where.is_dir():
        raise CatalogueError(f"no reproduction catalogue at {where}")
    entries: dict[str, Entry] = {}
    for path in sorted(where.glob("*.yaml")):
        try:
            scenario = load_scenario(path)
        except ScenarioError as exc:
            raise CatalogueError(str(exc)) from exc
        if scenario.repro is None:
            raise CatalogueError(f"{path}: a reproduction needs a `repro:` block")
        for name, config in scenario.repro.configurations.items():
            if config.kafka_version:
                problem = kafka_problem({**scenario.cluster.settings, **config.settings})
                if problem:
                    raise CatalogueError(f"{path}: configuration {name}: {problem}")
        if scenario.name in entries:
            raise CatalogueError(f"{path}: the name {scenario.name!r} is taken by another entry")
        entries[scenario.name] = Entry(scenario.name, path, scenario)
    if not entries:
        raise CatalogueError(f"no reproductions (*.yaml) in {where}")
    return entries


def kafka_problem(settings: Mapping[str, object]) -> str | None:
    """Why a cluster with these settings cannot be an Apache Kafka release, or None."""
    from ..launch.kafka.layout import settings_problem

    for key in settings:
        problem = settings_problem(key)
        if problem:
            return problem
    return None


def find(name: str, directory: Path | None = None) -> Entry:
    entries = load_catalogue(directory)
    if name not in entries:
        raise CatalogueError(
            f"no reproduction named {name!r}; the catalogue has: {', '.join(sorted(entries))}"
        )
    return entries[name]
