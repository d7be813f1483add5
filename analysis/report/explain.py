"""What the person who filed the bug reads first: which configuration ran, what a
read_committed reader sees in words (records hidden behind a stuck LSO are not lost), the
operator command that clears a hanging transaction, and what the defended configurations of a
reproduction would have done; evidence with readable times and the records' keys.

Reads, besides the verdict, what the run directory holds: ``scenario.yaml`` (a reproduction's
``repro:`` block names its entry and configuration), ``final_state.json`` (each partition's
LSO and the open transactions holding it), ``history.parquet`` (the keys of the records the
examples name).  Anything missing only leaves its sentence out.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...rundir.cluster_identity import cluster_identity, describe_cluster

SEC = 1_000_000_000
#: epoch nanoseconds after this are times (2001-09-09), not counts or offsets
EPOCH_NS = 10**18
SCENARIO_FILE = "scenario.yaml"
FINAL_STATE_FILE = "final_state.json"
HISTORY_FILE = "history.parquet"


# -- readable values --------------------------------------------------------------------------


def clock(ns: int) -> str:
    """Wall-clock time of epoch ``ns``: ``06:11:22.618 UTC``."""
    return datetime.fromtimestamp(ns / SEC, UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


def readable_time(ns: int, t0: int) -> str:
    """``+15.124 s (06:11:22.618 UTC)``: since the run started, and on the clock."""
    return f"{(ns - t0) / SEC:+.3f} s ({clock(ns)})"


def _is_time(key: str, value: Any) -> bool:
    return (
        isinstance(value, int)
        and not isinstance(value, bool)
        and value > EPOCH_NS
        and (key.endswith("_ns") or key == "t")
    )


def readable(value: Any, t0: int, key: str = "") -> Any:
    """``value`` with every epoch-ns time (keys ``*_ns`` and ``t``) made readable."""
    if _is_time(key, value):
        return readable_time(value, t0)
    if isinstance(value, dict):
        return {k: readable(v, t0, str(k)) for k, v in value.items()}
    if isinstance(value, list):
        return [readable(v, t0, key) for v in value]
    return value


# -- the run's configuration ------------------------------------------------------------------


@dataclass
class Configuration:
    """Which configuration ran: the report's header."""

    scenario: str
    seed: Any
    cluster: str
    #: a reproduction: its entry, bug report, configuration and what it predicts
    entry: str | None = None
    report: str | None = None
    configuration: str | None = None
    description: str | None = None
    predicted: str | None = None
    #: the entry's other configurations predicted valid: (name, description, command)
    defences: list[tuple[str, str, str]] = field(default_factory=list)


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return {}
    return data if isinstance(data, dict) else {}


def _predicted(config: Mapping[str, Any]) -> str:
    expect = config.get("expect") or {}
    names = ", ".join(expect.get("anomalies") or [])
    verdict = str(expect.get("verdict", "?"))
    return f"{verdict} ({names})" if names else verdict


def configuration_of(run: Mapping[str, Any], scenario: Mapping[str, Any]) -> Configuration:
    """From run.json (``run``) and the run's scenario.yaml (``scenario``)."""
    identity = cluster_identity(run)
    settings = (scenario.get("cluster") or {}).get("settings") or {}
    if identity["transaction_version"] is None and "transaction.version" in settings:
        identity["transaction_version"] = settings["transaction.version"]  # as configured
    out = Configuration(
        scenario=str(run.get("scenario") or scenario.get("name") or "?"),
        seed=run.get("seed", scenario.get("seed")),
        cluster=describe_cluster(identity),
    )
    repro = scenario.get("repro")
    if not isinstance(repro, dict):
        return out
    configs = repro.get("configurations") or {}
    name = repro.get("configuration")
    out.entry = str(scenario.get("name") or out.scenario)
    out.report = repro.get("report")
    if isinstance(name, str) and isinstance(configs.get(name), dict):
        out.configuration = name
        out.description = configs[name].get("description") or None
        out.predicted = _predicted(configs[name])
    for other, config in configs.items():
        if other == name or not isinstance(config, dict):
            continue
        if (config.get("expect") or {}).get("verdict") == "valid":
            command = shlex.join(["txnchaos", "repro", out.entry, "--config", str(other)])
            out.defences.append((str(other), str(config.get("description") or ""), command))
    return out


# -- what a reader sees -----------------------------------------------------------------------


#: the coordinator states of a transaction whose commit was decided: never abort it by hand
COMMIT_DECIDED = ("PrepareCommit", "CompleteCommit")


@dataclass
class Holder:
    """An open transaction holding a partition's LSO, and what its coordinator says of it."""

    producer_id: Any
    producer_epoch: Any
    first_offset: Any
    last_ns: int | None
    #: the coordinator's transactional id and state for this producer, if it knows it
    transactional_id: str | None = None
    state: str | None = None

    def words(self, t0: int) -> str:
        last = f", last write {readable_time(self.last_ns, t0)}" if self.last_ns else ""
        text = (
            f"the open transaction of producer {self.producer_id} epoch {self.producer_epoch} "
            f"from offset {self.first_offset}{last}"
        )
        if self.state is None:
            return text + " (its coordinator does not know it)"
        return text + f" ({self.transactional_id}: {self.state} at its coordinator)"

    @property
    def commit_decided(self) -> bool:
        return self.state in COMMIT_DECIDED


@dataclass
class StuckPartition:
    """A partition whose LSO stayed below its high watermark: what hides behind it, who holds
    it, and the command that clears it."""

    topic: str
    partition: int
    lso: int
    high_watermark: int
    holders: list[Holder]
    commands: list[tuple[str, str]]

    @property
    def name(self) -> str:
        return f"{self.topic}/{self.partition}"

    def sentence(self, t0: int) -> str:
        hidden = self.high_watermark - self.lso
        holders = "; ".join(h.words(t0) for h in self.holders) or "no open transaction listed"
        text = (
            f"{self.name}: the last stable offset (LSO) is stuck at {self.lso}, {hidden} "
            f"offset{'s' if hidden != 1 else ''} below the high watermark {self.high_watermark}, "
            f"held by {holders}. The records at offsets {self.lso} and above are in the log but "
            "hidden from read_committed readers (a hanging transaction): they are not lost, "
            "and become readable once the transaction holding the LSO ends."
        )
        decided = [h for h in self.holders if h.commit_decided]
        if decided:
            names = ", ".join(str(h.transactional_id) for h in decided)
            one = len(decided) == 1
            text += (
                f" The coordinator decided to commit {names} but {'its' if one else 'their'} "
                "markers were never written: aborting by hand would discard a committed "
                f"transaction's records, so {'it needs' if one else 'they need'} the "
                "coordinator to write the commit markers (a coordinator that loads a "
                "transaction in PrepareCommit again resends them)."
            )
        return text


def abort_commands(
    topic: str, partition: int, holders: Iterable[Holder], bootstrap: str
) -> list[tuple[str, str]]:
    """The operator commands (KIP-664) that abort each holder whose commit was not decided,
    lowest first offset first: the tool finds the producer id, epoch and coordinator epoch
    from the start offset (DescribeProducers); for a broker without DescribeProducers, the
    same with them given."""
    out = []
    for h in sorted(holders, key=lambda h: h.first_offset or 0):
        if h.commit_decided:
            continue
        cmd = ["txnchaos", "transactions", "abort", "--bootstrap", bootstrap, "--topic", topic]
        cmd += ["--partition", str(partition)]
        by_offset = [*cmd, "--start-offset", str(h.first_offset)]
        explicit = [*cmd, "--producer-id", str(h.producer_id), "--producer-epoch"]
        explicit += [str(h.producer_epoch), "--coordinator-epoch", "-1"]
        out.append((shlex.join(by_offset), shlex.join(explicit)))
    return out


def stuck_partitions(
    final_state: Mapping[str, Any] | None, bootstrap: str
) -> dict[tuple[str, int], StuckPartition]:
    """Every partition the final state shows with its LSO below its high watermark."""
    if not final_state:
        return {}
    opens: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for o in final_state.get("open_transactions") or []:
        opens.setdefault((o.get("topic"), o.get("partition")), []).append(o)
    coordinator = {
        (c.get("producer_id"), c.get("producer_epoch")): c
        for c in final_state.get("coordinator_transactions") or []
    }
    out = {}
    for p in final_state.get("partitions") or []:
        if p.get("lso") is None or p.get("high_watermark") is None:
            continue
        if p["lso"] >= p["high_watermark"]:
            continue
        key = (p["topic"], p["partition"])
        holders = []
        for o in sorted(opens.get(key, []), key=lambda o: o.get("first_offset") or 0):
            c = coordinator.get((o.get("producer_id"), o.get("producer_epoch"))) or {}
            last = o.get("last_ns")
            holders.append(
                Holder(
                    producer_id=o.get("producer_id"),
                    producer_epoch=o.get("producer_epoch"),
                    first_offset=o.get("first_offset"),
                    last_ns=int(last) if isinstance(last, int) else None,
                    transactional_id=c.get("transactional_id"),
                    state=c.get("state"),
                )
            )
        out[key] = StuckPartition(
            topic=str(p["topic"]),
            partition=int(p["partition"]),
            lso=int(p["lso"]),
            high_watermark=int(p["high_watermark"]),
            holders=holders,
            commands=abort_commands(str(p["topic"]), int(p["partition"]), holders, bootstrap),
        )
    return out


def _place(evidence: Any) -> tuple[str, int, int] | None:
    """The (topic, partition, offset) a record's evidence names: its ``write``, else itself."""
    for d in ((evidence or {}).get("write"), evidence):
        if isinstance(d, dict) and all(
            d.get(k) is not None for k in ("topic", "partition", "offset")
        ):
            return str(d["topic"]), int(d["partition"]), int(d["offset"])
    return None


def visibility(
    evidence: Any,
    stuck: Mapping[tuple[str, int], StuckPartition],
    lso: Mapping[tuple[str, int], int],
) -> str | None:
    """A lost write's record in words: hidden behind a stuck LSO, or truly lost."""
    place = _place(evidence)
    if place is None:
        return None
    topic, partition, offset = place
    stuck_here = stuck.get((topic, partition))
    if stuck_here is not None and offset >= stuck_here.lso:
        return (
            f"hidden, not lost: offset {offset} is at or above {topic}/{partition}'s stuck LSO "
            f"{stuck_here.lso}; the record is in the log and becomes readable once the "
            "transaction holding the LSO ends"
        )
    end = lso.get((topic, partition))
    below = f" below {topic}/{partition}'s LSO {end}" if end is not None else ""
    return f"lost: offset {offset} is{below}, readable, and no reader returned it"


# -- record keys ------------------------------------------------------------------------------


def record_keys(run_dir: Path, values: set[str]) -> dict[str, str | None]:
    """The keys the history's sends gave the records ``values`` (the examples name them)."""
    path = run_dir / HISTORY_FILE
    if not values or not path.is_file():
        return {}
    try:
        import pyarrow.parquet as pq

        table = pq.read_table(
            path, columns=["value", "key", "type"], filters=[("value", "in", sorted(values))]
        )
    except Exception:  # an older or odd history: the keys are only a convenience
        return {}
    out: dict[str, str | None] = {}
    for row in table.to_pylist():
        if row["type"] == "send" or row["value"] not in out:
            out[row["value"]] = row["key"]
    return out


def example_values(examples: Iterable[Mapping[str, Any]]) -> set[str]:
    """The record values the examples' evidence names (``value`` fields, at any depth)."""
    out: set[str] = set()
    stack: list[Any] = [e.get("evidence") for e in examples]
    while stack:
        d = stack.pop()
        if isinstance(d, dict):
            v = d.get("value")
            if isinstance(v, str):
                out.add(v)
            stack.extend(x for x in d.values() if isinstance(x, dict | list))
        elif isinstance(d, list):
            stack.extend(d)
    return out


def read_run_files(run_dir: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """(scenario.yaml, final_state.json) of the run, empty/None where absent."""
    root = Path(run_dir)
    scenario = _read_yaml(root / SCENARIO_FILE)
    try:
        final_state = json.loads((root / FINAL_STATE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        final_state = None
    return scenario, final_state if isinstance(final_state, dict) else None


def bootstrap_of(run: Mapping[str, Any]) -> str:
    """Where the operator command points: an external cluster's address as the run knew it;
    our own clusters stop with the run (``HOST:PORT``: the cluster it happens on)."""
    cluster = run.get("cluster") if isinstance(run.get("cluster"), Mapping) else {}
    assert isinstance(cluster, Mapping)
    if run.get("cluster_kind") == "external" and cluster.get("bootstrap"):
        return str(cluster["bootstrap"])
    return "HOST:PORT"


def workload_stats(run_dir: str) -> list[dict[str, Any]]:
    """locust's statistics each second (workload-stats.jsonl, the orchestrator's copy of the
    workload's live statistics); the last line, the final totals, is left out."""
    path = Path(run_dir) / "workload-stats.jsonl"
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return []
    out = []
    for line in lines[:-1]:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict):
            out.append(row)
    return out
