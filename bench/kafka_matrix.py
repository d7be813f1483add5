"""Scenarios on Apache Kafka: each scenario x transaction.version x seed, one `txnchaos run
--launcher kafka` at a time, every verdict recorded.

A cell is VALID, INVALID (the run is kept; each one is investigated: a harness or checker
bug is fixed, a Kafka or client bug is written up in docs/findings/) or a harness failure.
The scenario's own file is run with ``transaction.version`` set in its cluster settings
(a copy in the output directory), so the same mix runs at TV2 and TV0.

Goal (issue 33): the three nightly mixes and smoke, at TV2 and TV0, on at least 10 seeds
each: no false positive.

Run: .venv/bin/python bench/kafka_matrix.py [--scenarios a.yaml,b.yaml] [--tv 2,0]
     [--seeds 1-10] [--kafka-version 4.4.0] [--out DIR]
Writes DIR/results.jsonl (one line per run, appended as it finishes: a long matrix can be
stopped and resumed, done cells are skipped) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_SCENARIOS = [
    "scenarios/smoke.yaml",
    "scenarios/nightly/client.yaml",
    "scenarios/nightly/network.yaml",
    "scenarios/nightly/process.yaml",
]


def seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def variant(scenario: Path, tv: int, out: Path) -> Path:
    """The scenario with ``transaction.version: tv`` in its cluster settings."""
    doc = yaml.safe_load(scenario.read_text())
    doc.setdefault("cluster", {}).setdefault("settings", {})["transaction.version"] = tv
    path = out / "scenarios" / f"{scenario.stem}-tv{tv}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def checker_summary(run_dir: Path) -> tuple[str, dict[str, int], str | None]:
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return "harness-failed", {}, None
    invalid = {
        name: int(c.get("anomaly_count") or 1)
        for name, c in verdict["checkers"].items()
        if c.get("status") == "invalid"
    }
    metrics = verdict["checkers"].get("metrics", {})
    return str(verdict["status"]), invalid, metrics.get("reason")


def node_errors(run_dir: Path) -> list[str]:
    """The Java programming errors Kafka's nodes logged (the verdict's node_error findings):
    ``IllegalStateException at TransactionMetadata.prepareTransitionTo(...)``, one per kind.
    A Kafka bug beside the verdict, never a false positive of the checkers."""
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return []
    return [
        f"{str(f.get('exception')).rsplit('.', 1)[-1]} at {f.get('where')}"
        for f in verdict.get("findings") or []
        if f.get("kind") == "node_error"
    ]


KAFKA_20734 = "Couldn't find leader endpoint for partitions"


def skipped_markers(run_dir: Path) -> set[tuple[str, str]]:
    """(transactional id, topic-partition) of every marker a coordinator skipped because the
    partition had no leader endpoint (KAFKA-20734's log line)."""
    skipped: set[tuple[str, str]] = set()
    for log in sorted((run_dir / "cluster").glob("node-*/node.log")):
        for line in log.read_text(errors="replace").splitlines():
            if KAFKA_20734 not in line:
                continue
            inside, _, rest = line.split("Set(", 1)[-1].partition(")")
            tid = rest.split("transaction markers for ", 1)[-1].split(",", 1)[0].strip()
            skipped |= {(tid, p.strip()) for p in inside.split(",")}
    return skipped


def _transaction_partitions(run_dir: Path, writer: str, txn: int) -> set[tuple[str, str]]:
    """(transactional id, topic-partition) of every write ``writer`` sent in ``txn``."""
    out: set[tuple[str, str]] = set()
    try:
        lines = (run_dir / "history" / f"{writer}.jsonl").read_text(errors="replace").splitlines()
    except OSError:
        return out
    for line in lines:
        try:
            op = json.loads(line)
        except ValueError:
            continue
        if op.get("type") != "send" or op.get("txn") != txn:
            continue
        for item in op.get("items") or []:
            if item.get("partition") is not None:
                tp = f"{item['topic']}-{int(item['partition'])}"
                out.add((str(op.get("transactional_id") or writer), tp))
    return out


def _named_partition(ev: dict[str, Any]) -> str | None:
    """The topic-partition an example's evidence is about, if it names one."""
    for where in (ev.get("partition_open_transaction"), ev.get("write"), ev):
        if not isinstance(where, dict):
            continue
        if where.get("topic") is not None and where.get("partition") is not None:
            return f"{where['topic']}-{int(where['partition'])}"
    return None


def stuck_lsos(verdict: dict[str, Any]) -> dict[str, int]:
    """The last stable offset each partition ended stuck at (hanging_transactions'
    ``end_lso_lag`` examples), by topic-partition."""
    out: dict[str, int] = {}
    hanging = verdict.get("checkers", {}).get("hanging_transactions", {})
    for e in hanging.get("examples") or []:
        ev = e.get("evidence") or {}
        if e.get("kind") == "end_lso_lag" and ev.get("lso") is not None:
            out[f"{ev['topic']}-{int(ev['partition'])}"] = int(ev["lso"])
    return out


def _hidden(ev: dict[str, Any], skipped: set[tuple[str, str]], stuck: dict[str, int]) -> bool:
    """A write at or above the LSO its partition ended stuck at, on a partition whose marker
    was skipped (for any producer): hidden from read_committed readers behind that open
    transaction, not lost."""
    write = ev.get("write") or {}
    if write.get("topic") is None or write.get("partition") is None:
        return False
    tp = f"{write['topic']}-{int(write['partition'])}"
    lso = stuck.get(tp)
    offset = write.get("offset")
    return (
        lso is not None
        and offset is not None
        and int(offset) >= lso
        and (tp in {p for _, p in skipped})
    )


def _linked(
    ev: dict[str, Any],
    run_dir: Path,
    skipped: set[tuple[str, str]],
    stuck: dict[str, int] | None = None,
) -> bool | None:
    """Whether an example leads to a skipped marker: the transaction it names wrote to a
    partition whose marker was skipped for that transactional id, or its write is hidden
    behind the transaction left open there (``stuck``: stuck_lsos), or the partition it names
    is one; None when it names neither a transaction nor a partition."""
    txn = ev.get("transaction") or {}
    if txn.get("writer") is not None and txn.get("txn") is not None:
        wrote = _transaction_partitions(run_dir, str(txn["writer"]), int(txn["txn"]))
        if wrote:
            return bool(wrote & skipped) or _hidden(ev, skipped, stuck or {})
    tp = _named_partition(ev)
    if tp is None:
        return None
    return tp in {p for _, p in skipped}


def known_cause(run_dir: Path, invalid: dict[str, int]) -> str | None:
    """A known Apache Kafka bug the run's anomalies come from, when its trace is there:
    KAFKA-20734 (docs/findings/kafka-20734-offline-partition-markers.md) when a coordinator
    skipped the markers of a partition with no leader and every example of the invalid
    checkers that names a transaction or a partition leads there: a hanging transaction or
    a skipped read on such a partition, or a transaction that wrote to one (its skipped
    marker left the records open until the producer's next transaction there ended them
    with that transaction's outcome: an aborted transaction committed there, or a committed
    one aborted). Examples that name neither (a copier's missing output, by its input) are
    taken as consequences; at least one example must lead there."""
    if not invalid:
        return None
    try:
        verdict = json.loads((run_dir / "verdict.json").read_text())
    except (OSError, ValueError):
        return None
    skipped = skipped_markers(run_dir)
    if not skipped:
        return None
    leads = False
    stuck = stuck_lsos(verdict)
    for name in invalid:
        for e in verdict["checkers"].get(name, {}).get("examples") or []:
            linked = _linked(e.get("evidence") or {}, run_dir, skipped, stuck)
            if linked is False:
                return None
            leads = leads or bool(linked)
    return "KAFKA-20734" if leads else None


def run_cell(
    scenario: Path, name: str, tv: int, seed: int, version: str | None, out: Path
) -> dict[str, Any]:
    run_dir = out / "runs" / f"{name}-tv{tv}-seed{seed}"
    if run_dir.exists():  # left by a matrix stopped in the middle of this run
        shutil.rmtree(run_dir)
    cmd = [
        sys.executable,
        "-m",
        "txnchaos.jobs.cli",
        "run",
        str(scenario),
        "--launcher",
        "kafka",
    ]
    cmd += ["--seed", str(seed), "--out", str(run_dir)]
    if version:
        cmd += ["--kafka-version", version]
    t0 = time.monotonic()
    log = out / "logs" / f"{run_dir.name}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("w") as fh:
        code = subprocess.run(
            cmd, stdout=fh, stderr=subprocess.STDOUT, cwd=ROOT, check=False
        ).returncode
    status, invalid, metrics_reason = checker_summary(run_dir)
    cause = known_cause(run_dir, invalid) if status == "invalid" else None
    return {
        "known_cause": cause,
        "scenario": name,
        "tv": tv,
        "seed": seed,
        "exit": code,
        "verdict": status,
        "invalid_checkers": invalid,
        "metrics_reason": metrics_reason,
        "node_errors": node_errors(run_dir),
        "wall_s": round(time.monotonic() - t0, 1),
        "run_dir": str(run_dir),
    }


def table(rows: list[dict[str, Any]]) -> str:
    cells: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in rows:
        cells.setdefault((r["scenario"], r["tv"]), []).append(r)
    lines = [
        "| scenario | TV | runs | valid | invalid: Kafka bug | invalid: other | harness failed "
        "| median wall |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for (name, tv), rs in sorted(cells.items()):
        walls = sorted(r["wall_s"] for r in rs)
        n = {k: sum(r["verdict"] == k for r in rs) for k in ("valid", "invalid", "harness-failed")}
        known = sum(r["verdict"] == "invalid" and bool(r.get("known_cause")) for r in rs)
        lines.append(
            f"| {name} | {tv} | {len(rs)} | {n['valid']} | {known} | {n['invalid'] - known} | "
            f"{n['harness-failed']} | {walls[len(walls) // 2]:.0f} s |"
        )
    bad = [r for r in rows if r["verdict"] != "valid" or r.get("node_errors")]
    for r in bad:
        errors = "; ".join(r.get("node_errors") or [])
        lines.append(
            f"- {r['scenario']} TV{r['tv']} seed {r['seed']}: {r['verdict']} "
            f"{r['invalid_checkers']} {r.get('known_cause') or ''}"
            f"{' node errors: ' + errors if errors else ''} ({r['run_dir']})"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--scenarios", default=",".join(DEFAULT_SCENARIOS))
    ap.add_argument("--tv", default="2,0", help="transaction.version levels (default 2,0)")
    ap.add_argument("--seeds", default="1-10", help="e.g. 1-10 or 1,4,7")
    ap.add_argument("--kafka-version", default=None)
    ap.add_argument("--out", type=Path, default=Path("var/kafka-matrix"))
    args = ap.parse_args()
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = out / "results.jsonl"
    done: list[dict[str, Any]] = []
    if results.exists():
        done = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    seen = {(r["scenario"], r["tv"], r["seed"]) for r in done}
    # seed by seed over every cell, so that a matrix stopped early covers every cell alike
    cells = []
    for scenario in [Path(s) for s in args.scenarios.split(",")]:
        nightly = scenario.parent.name == "nightly"
        name = f"nightly-{scenario.stem}" if nightly else scenario.stem
        for tv in [int(x) for x in args.tv.split(",")]:
            cells.append((name, tv, variant(ROOT / scenario, tv, out)))
    for seed in seeds(args.seeds):
        for name, tv, path in cells:
            if (name, tv, seed) in seen:
                continue
            row = run_cell(path, name, tv, seed, args.kafka_version, out)
            done.append(row)
            with results.open("a") as fh:
                fh.write(json.dumps(row) + "\n")
            errors = "; ".join(row["node_errors"])
            print(
                f"{name} TV{tv} seed {seed}: {row['verdict']} "
                f"{row['invalid_checkers'] or ''}{' node errors: ' + errors if errors else ''} "
                f"({row['wall_s']} s)",
                flush=True,
            )
    print(table(done))
    return 0 if all(r["verdict"] == "valid" for r in done) else 1


if __name__ == "__main__":
    sys.exit(main())
