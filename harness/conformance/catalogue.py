"""The probe catalogue: what a probe is, the cluster configurations probes run under, and
the one registry (:data:`PROBES`) the probe modules fill.

A probe is a short function of a :class:`~.context.ProbeContext` that sends requests and
returns a normalised, JSON-able outcome; two clusters conform on it when the outcomes
are equal. ``@probe(name, tags=..., configs=...)`` registers one probe per configuration
it names, as ``name[config]``. A probe whose function is a generator observes across a
restart: it runs to its ``yield``, every node of the cluster restarts once for all such
probes of the configuration, and it resumes to return its outcome.
"""

from __future__ import annotations

import fnmatch
import inspect
from collections.abc import Callable, Generator, Iterable
from dataclasses import dataclass
from typing import Any

from .context import ProbeContext

Outcome = dict[str, Any]
ProbeFunction = Callable[[ProbeContext], Outcome | Generator[None, None, Outcome]]


@dataclass(frozen=True)
class Config:
    """A cluster configuration: both clusters start with exactly these settings."""

    name: str
    settings: tuple[str, ...]
    about: str
    #: settings Apache Kafka needs besides (our cluster has no such setting)
    kafka_settings: tuple[str, ...] = ()

    @property
    def level(self) -> int:
        """The configuration's transaction.version."""
        for pair in self.settings:
            key, _, value = pair.partition("=")
            if key == "transaction.version":
                return int(value)
        return 2


#: settings of every configuration (a timed-out transaction is aborted within ~0.5 s)
BASE_SETTINGS: tuple[str, ...] = (
    "transaction.abort.timed.out.transaction.cleanup.interval.ms=500",
)

#: Apache Kafka 4.4 serves InitProducerId v6 (KIP-939's Enable2Pc, KeepPreparedTxn) only as
#: an unstable version: without this setting it closes the connection of a v6 request
KIP939_ON_KAFKA = ("unstable.api.versions.enable=true",)

CONFIGS: dict[str, Config] = {
    c.name: c
    for c in (
        Config("tv2", ("transaction.version=2",), "KIP-890 part 2, verification on (default)"),
        Config(
            "tv2-noverify",
            ("transaction.version=2", "transaction.partition.verification.enable=false"),
            "KIP-890 part 2, verification off",
        ),
        Config("tv1", ("transaction.version=1",), "KIP-890 part 1, verification on"),
        Config(
            "tv1-noverify",
            ("transaction.version=1", "transaction.partition.verification.enable=false"),
            "KIP-890 part 1, verification off",
        ),
        Config("tv0", ("transaction.version=0",), "before KIP-890, verification on"),
        Config(
            "tv0-noverify",
            ("transaction.version=0", "transaction.partition.verification.enable=false"),
            "before KIP-890, verification off",
        ),
        Config(
            "tv2-retention",
            ("transaction.version=2", "log.retention.check.interval.ms=300"),
            "retention runs every 0.3 s",
        ),
        Config(
            "tv2-static",
            (
                "transaction.version=2",
                "log.segment.bytes=1048576",
                "log.retention.ms=3600000",
                "message.max.bytes=1048588",
            ),
            "static broker settings topics inherit: log.segment.bytes and log.retention.ms "
            "changed, message.max.bytes at its default's value (DescribeConfigs' sources)",
        ),
        Config(
            "tv2-v6",
            ("transaction.version=2",),
            "KIP-939 off, InitProducerId v6 served (Kafka: unstable.api.versions.enable)",
            KIP939_ON_KAFKA,
        ),
        Config(
            "tv2-2pc",
            ("transaction.version=2", "transaction.two.phase.commit.enable=true"),
            "KIP-939 enabled (transaction.two.phase.commit.enable)",
            KIP939_ON_KAFKA,
        ),
        Config(
            "tv1-2pc",
            ("transaction.version=1", "transaction.two.phase.commit.enable=true"),
            "KIP-939 enabled below TV2",
            KIP939_ON_KAFKA,
        ),
    )
}


@dataclass(frozen=True)
class Probe:
    name: str  # "area.what[config]"
    base: str  # "area.what"
    tags: tuple[str, ...]
    config: Config
    function: ProbeFunction
    doc: str

    @property
    def restarts(self) -> bool:
        return inspect.isgeneratorfunction(self.function)

    def settings(self, extra: Iterable[str] = ()) -> list[str]:
        """Our cluster's settings for this probe."""
        return [*BASE_SETTINGS, *self.config.settings, *extra]

    def kafka_settings(self, extra: Iterable[str] = ()) -> list[str]:
        """Apache Kafka's: ours less ``txnchaos.*`` (our own settings and bug switches),
        plus what Kafka needs besides."""
        ours = self.settings(extra)
        return [s for s in ours if not s.startswith("txnchaos.")] + list(self.config.kafka_settings)


PROBES: dict[str, Probe] = {}


def probe(
    name: str, *, tags: Iterable[str], configs: Iterable[str] = ("tv2",)
) -> Callable[[ProbeFunction], ProbeFunction]:
    """Register ``function`` as probe ``name`` under each configuration in ``configs``."""

    def register(function: ProbeFunction) -> ProbeFunction:
        doc = inspect.cleandoc(function.__doc__ or "").split("\n\n")[0].replace("\n", " ")
        for config in configs:
            full = f"{name}[{config}]"
            if full in PROBES:
                raise ValueError(f"probe {full} registered twice")
            PROBES[full] = Probe(full, name, tuple(tags), CONFIGS[config], function, doc)
        return function

    return register


def catalogue() -> dict[str, Probe]:
    """Every probe (importing the probe modules registers them)."""
    from . import probes  # noqa: F401  (registration)

    return PROBES


def _literal_brackets(pattern: str) -> str:
    """``*[tv1]`` means the configuration tv1, not a character class."""
    return pattern.replace("[", "[[]")


def select(patterns: Iterable[str]) -> list[Probe]:
    """The probes whose name, base name or a tag matches one of ``patterns`` (globs);
    every probe when there are none. Ordered by configuration, then name."""
    wanted = [_literal_brackets(p) for p in patterns]
    chosen = [
        p
        for p in catalogue().values()
        if not wanted
        or any(
            fnmatch.fnmatchcase(p.name, pat)
            or fnmatch.fnmatchcase(p.base, pat)
            or any(fnmatch.fnmatchcase(t, pat) for t in p.tags)
            for pat in wanted
        )
    ]
    order = list(CONFIGS)
    return sorted(chosen, key=lambda p: (order.index(p.config.name), p.name))


def markdown(probes: Iterable[Probe]) -> str:
    """The catalogue as docs/conformance.md shows it: one row per probe and the
    configurations it runs under."""
    by_base: dict[str, list[Probe]] = {}
    for p in probes:
        by_base.setdefault(p.base, []).append(p)
    rows = ["| probe | area | configurations | what it observes |", "|---|---|---|---|"]
    for base in sorted(by_base):
        ps = by_base[base]
        configs = ", ".join(sorted(p.config.name for p in ps))
        rows.append(f"| `{base}` | {', '.join(ps[0].tags)} | {configs} | {ps[0].doc} |")
    total = sum(len(v) for v in by_base.values())
    rows.append("")
    rows.append(f"{len(by_base)} probes, {total} with their configurations.")
    return "\n".join(rows)
