"""Which catalogue entry an invalid run resembles: the entry whose bug configuration
the run's cluster had on (its settings are all in the run's), else the entries whose
predicted checkers all flagged the run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...cluster.settings import render_setting
from .catalogue import CatalogueError, Entry, load_catalogue


@dataclass(frozen=True)
class Resemblance:
    entry: Entry
    configuration: str
    switched_on: bool  # the run's cluster had this configuration's settings

    def sentence(self) -> str:
        spec = self.entry.spec
        why = (
            "its cluster ran with that entry's bug configuration"
            if self.switched_on
            else "the same checkers flag that entry's bug"
        )
        return (
            f"It resembles the catalogue entry {self.entry.name} ({spec.report}): "
            f"{spec.symptom.rstrip('.')} ({why}; reproduce with `txnchaos repro "
            f"{self.entry.name}`)."
        )


def sentences(flagged: set[str], settings: list[str]) -> list[str]:
    """The report's words for :func:`resembling` (the analysis's ``Resembles``)."""
    return [r.sentence() for r in resembling(flagged, settings)]


def resembling(
    flagged: set[str], settings: list[str], directory: Path | None = None, limit: int = 2
) -> list[Resemblance]:
    """Entries this run resembles, strongest first; none when there is no catalogue."""
    if not flagged:
        return []
    try:
        entries = load_catalogue(directory)
    except CatalogueError:
        return []
    have = set(settings)
    strong, weak = [], []
    for entry in entries.values():
        for name, config in entry.spec.configurations.items():
            if config.expect.verdict != "invalid" or not set(config.expect.anomalies) <= flagged:
                continue
            pairs = {f"{k}={render_setting(v)}" for k, v in config.settings.items()}
            if pairs and pairs <= have:
                strong.append(Resemblance(entry, name, True))
            else:
                weak.append(Resemblance(entry, name, False))
            break
    return (strong or weak)[:limit]
