"""Recorded outcomes: Apache Kafka's answers to every probe, as JSON committed beside the
code (``--record FILE`` writes them, ``--against recorded:FILE`` compares ours with them).

Format 1::

    {"format": 1, "cluster": "apache-kafka 4.4.0", "extra_settings": [...],
     "probes": {"<probe>": {"settings": [...], "outcome": {...}}}}
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .catalogue import Outcome

FORMAT = 1
#: the recording CI compares against (Kafka's answers for the launcher's default release)
DEFAULT = Path(__file__).with_name("recorded") / "kafka-4.4.0.json"


class RecordingError(ValueError):
    """A recording that cannot be read (the message names the file and the problem)."""


@dataclass
class Recording:
    cluster: str
    extra_settings: list[str]
    probes: dict[str, dict[str, Any]]  # name -> {"settings": [...], "outcome": {...}}

    def outcome(self, probe: str) -> Outcome | None:
        entry = self.probes.get(probe)
        return None if entry is None else entry["outcome"]

    def settings(self, probe: str) -> list[str] | None:
        entry = self.probes.get(probe)
        return None if entry is None else list(entry["settings"])


def write(path: Path, cluster: str, extra: list[str], entries: dict[str, dict[str, Any]]) -> None:
    doc = {
        "format": FORMAT,
        "cluster": cluster,
        "extra_settings": extra,
        "probes": dict(sorted(entries.items())),
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, sort_keys=False) + "\n")


def read(path: Path) -> Recording:
    try:
        doc = json.loads(path.read_text())
    except OSError as exc:
        raise RecordingError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise RecordingError(f"{path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise RecordingError(f"{path}: not a conformance recording of format {FORMAT}")
    probes = doc.get("probes")
    if not isinstance(probes, dict) or not all(
        isinstance(v, dict) and "outcome" in v and isinstance(v.get("settings"), list)
        for v in probes.values()
    ):
        raise RecordingError(f"{path}: 'probes' must map names to settings and outcome")
    return Recording(str(doc.get("cluster", "?")), list(doc.get("extra_settings", [])), probes)
