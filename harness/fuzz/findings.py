"""A finding on disk: what went wrong and the exact bytes of the case(s) behind it, so
``txnchaos fuzz --replay FILE`` can send them again."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from .mutators import Case

KINDS = ("crash", "hang", "traceback", "rss", "mismatch")


class FindingFileError(ValueError):
    """A --replay file that is not a finding."""


@dataclass
class Finding:
    kind: str
    """crash, hang, traceback, rss or mismatch (see :data:`KINDS`)."""
    node_id: int
    role: str
    detail: str
    cases: list[Case] = field(default_factory=list)
    """The case that reproduced it alone (one), or every suspect when none did."""
    reproduced: bool = False

    def to_json(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["cases"] = [_case_json(c) for c in self.cases]
        return doc


def _case_json(case: Case) -> dict[str, Any]:
    doc = asdict(case)
    doc["hex"] = doc.pop("data").hex()
    doc["mutators"] = list(case.mutators)
    return doc


def save(finding: Finding, directory: Path, number: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    first = finding.cases[0].case_id if finding.cases else "none"
    path = directory / f"{number:03d}-{finding.kind}-node{finding.node_id}-case{first}.json"
    path.write_text(json.dumps(finding.to_json(), indent=2) + "\n")
    return path


def load(path: Path) -> Finding:
    """Read a finding file; :class:`FindingFileError` names what is wrong with it."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise FindingFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise FindingFileError(f"{path} is not JSON: {exc}") from exc
    try:
        cases = [
            Case(
                case_id=int(c["case_id"]),
                seed=int(c["seed"]),
                node=int(c["node"]),
                api_key=int(c["api_key"]),
                api_version=int(c["api_version"]),
                mutators=tuple(str(m) for m in c["mutators"]),
                data=bytes.fromhex(c["hex"]),
                single=bool(c["single"]),
            )
            for c in doc["cases"]
        ]
        finding = Finding(
            kind=str(doc["kind"]),
            node_id=int(doc["node_id"]),
            role=str(doc["role"]),
            detail=str(doc.get("detail", "")),
            cases=cases,
            reproduced=bool(doc.get("reproduced", False)),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise FindingFileError(f"{path} is not a fuzz finding: {exc!r}") from exc
    if not cases:
        raise FindingFileError(f"{path} holds no case to replay")
    return finding


__all__ = ["KINDS", "Finding", "FindingFileError", "load", "save"]
