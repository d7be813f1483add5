"""``txnchaos fuzz``: the command line of the protocol fuzzer (see the package docstring)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from ..cli_input import Duration, InputError, check_bootstrap
from ..launch.local import LaunchError
from .findings import FindingFileError, load
from .runner import STRATEGIES, FuzzOptions, case_for
from .session import ClusterChoice, Session, fuzz, replay_finding

EXIT_CLEAN, EXIT_FINDINGS = 0, 1


def _bootstrap(value: str) -> list[tuple[str, int]]:
    out = []
    for part in value.split(","):
        host, _, port = part.strip().rpartition(":")
        out.append((host, int(port)))
    return out


@click.command("fuzz")
@click.option(
    "--cases", type=click.IntRange(1), default=100_000, show_default=True, help="Cases to send."
)
@click.option(
    "--seed",
    type=click.IntRange(0, 2**31 - 1),
    default=1,
    show_default=True,
    help="With a case id, names a case's bytes exactly (on a cluster serving the same APIs).",
)
@click.option(
    "--first-case", type=click.IntRange(0), default=0, show_default=True, help="First case id."
)
@click.option(
    "--strategy",
    type=click.Choice(STRATEGIES),
    default="bytes",
    show_default=True,
    help="bytes: mutate valid frames' bytes; typed: valid frames with hostile field values "
    "(extremes, other producers' ids and epochs, control characters, regular expressions, "
    "bad topic configs and record batches); mixed: both, alternating.",
)
@click.option("--brokers", type=click.IntRange(1, 16), default=1, show_default=True)
@click.option(
    "--coordinators",
    type=click.IntRange(0, 16),
    default=1,
    show_default=True,
    help="Coordinator nodes (0: broker 1 is the coordinator too).",
)
@click.option(
    "--set", "settings", multiple=True, metavar="KEY=VALUE", help="Node setting (own cluster)."
)
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Data directory of the cluster it starts (default: a temporary one, removed).",
)
@click.option(
    "--bootstrap",
    default=None,
    metavar="HOST:PORT[,...]",
    callback=check_bootstrap,
    help="Fuzz these running nodes instead of starting a cluster (health is then only what "
    "they answer: no process, RSS or log checks, no restarts).",
)
@click.option(
    "--concurrency",
    type=click.IntRange(1, 512),
    default=64,
    show_default=True,
    help="Connections sending cases at once.",
)
@click.option(
    "--batch",
    type=click.IntRange(1),
    default=5_000,
    show_default=True,
    help="Cases between health checks.",
)
@click.option(
    "--case-timeout",
    type=Duration(),
    default="30s",
    show_default=True,
    help="How long a case may go unanswered before it counts as unanswered (a duration).",
)
@click.option(
    "--health-timeout",
    type=Duration(),
    default="10s",
    show_default=True,
    help="How long a node has to answer ApiVersions and Metadata on a fresh connection.",
)
@click.option(
    "--rss-limit-mb",
    type=click.FloatRange(1),
    default=512.0,
    show_default=True,
    help="Resident memory every node must stay within (checked after every batch).",
)
@click.option(
    "--findings",
    "findings_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("fuzz-findings"),
    show_default=True,
    help="Where findings are saved (one JSON file each, with the case bytes in hex).",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Write the summary here as JSON.",
)
@click.option(
    "--replay",
    "replay_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Send the cases of a finding file again (to a fresh cluster, or --bootstrap) and "
    "report whether the node is still well.",
)
@click.option(
    "--show-case",
    type=click.IntRange(0),
    default=None,
    help="Print the bytes of case N (of --seed) as hex, against the nodes' APIs, and exit.",
)
def fuzz_command(
    cases: int,
    seed: int,
    first_case: int,
    strategy: str,
    brokers: int,
    coordinators: int,
    settings: tuple[str, ...],
    data_dir: Path | None,
    bootstrap: str | None,
    concurrency: int,
    batch: int,
    case_timeout: float,
    health_timeout: float,
    rss_limit_mb: float,
    findings_dir: Path,
    out: Path | None,
    replay_file: Path | None,
    show_case: int | None,
) -> None:
    """Fuzz the nodes' Kafka protocol handling with mutated request frames.

    Seeds are valid frames of every version of every API each node serves (from its
    ApiVersions answer). --strategy bytes (the default) mutates them reproducibly: bit
    flips, bytes set, truncation, length and count lies (huge varints, negative counts),
    nulls where none are allowed, other API keys and versions, garbage tails, a
    32,767-byte client id, several frames in one write, size prefixes that lie.
    --strategy typed sends valid frames with hostile field values instead; mixed
    alternates. After every --batch cases each node must be alive, answer ApiVersions
    and Metadata on a fresh connection within --health-timeout, stay within
    --rss-limit-mb, and have logged no traceback or ERROR line. A finding is narrowed
    down to the case that causes it and saved with its bytes; `--replay FILE` sends
    them again.

    Exit code 0: no findings; 1: findings (listed, and in --out); 2: bad input.
    """
    choice = ClusterChoice(
        brokers=brokers,
        coordinators=coordinators,
        data_dir=data_dir,
        bootstrap=_bootstrap(bootstrap) if bootstrap else None,
        settings=list(settings),
    )
    if replay_file is not None:
        sys.exit(_replay(choice, replay_file, health_timeout))
    options = FuzzOptions(
        cases=cases,
        seed=seed,
        first_case=first_case,
        batch=batch,
        concurrency=concurrency,
        case_timeout=case_timeout,
        health_timeout=health_timeout,
        rss_limit_mb=rss_limit_mb,
        findings_dir=findings_dir,
        strategy=strategy,
    )
    try:
        with Session(choice) as session:
            if show_case is not None:
                case = asyncio.run(_case(session, options, show_case))
                click.echo(case)
                return
            summary = asyncio.run(fuzz(session, options, lambda line: click.echo(line, err=True)))
    except LaunchError as exc:
        raise InputError(str(exc)) from exc
    except OSError as exc:
        raise InputError(f"cannot reach the nodes: {exc.strerror or exc}") from exc
    doc = summary.to_json()
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=2) + "\n")
    click.echo(
        f"fuzz: {doc['cases']:,} cases in {doc['seconds']:.0f} s ({doc['cases_per_s']:,}/s): "
        f"{doc['crashes']} crashes, {doc['hangs']} hangs, {doc['tracebacks']} tracebacks, "
        f"{doc['mismatches']} mismatches; max RSS "
        + ", ".join(f"node {k} {v:.0f} MiB" for k, v in doc["max_rss_mb"].items())
        + f" (bound {rss_limit_mb:.0f} MiB)"
    )
    for path in doc["findings"]:
        click.echo(f"finding: {path}")
    sys.exit(EXIT_CLEAN if summary.clean else EXIT_FINDINGS)


async def _case(session: Session, options: FuzzOptions, case_id: int) -> str:
    from .discover import api_ranges, plausible_values
    from .seeds import build_corpus
    from .session import typed_context

    ranges = [await api_ranges(n) for n in session.nodes]
    plausible = await plausible_values(session.nodes, ranges)
    corpora = [build_corpus(r, plausible) for r in ranges]
    typed = await typed_context(session.nodes, ranges, plausible, options)
    case = case_for(corpora, options, case_id, typed)
    seed = options.seed
    node = session.nodes[case.node]
    return (
        f"case {case_id} (seed {seed}): {node.name}, api {case.api_key} v{case.api_version}, "
        f"{'+'.join(case.mutators)}\n{case.data.hex()}"
    )


def _replay(choice: ClusterChoice, path: Path, timeout: float) -> int:
    try:
        finding = load(path)
    except FindingFileError as exc:
        raise InputError(str(exc)) from exc
    try:
        with Session(choice) as session:
            node, outcomes, health, problems = asyncio.run(
                replay_finding(session, finding, timeout)
            )
    except LaunchError as exc:
        raise InputError(str(exc)) from exc
    click.echo(f"replayed {len(finding.cases)} case(s) of {path} to {node.name}:")
    for case, outcome in zip(finding.cases, outcomes, strict=True):
        click.echo(f"  case {case.case_id} api {case.api_key} v{case.api_version}: {outcome.value}")
    well = health.ok and not problems
    if not health.ok:
        click.echo(f"not well: {health.problem}")
    for problem in problems:
        click.echo(f"logged:\n{problem}")
    click.echo("reproduced" if not well else "not reproduced: the node is well")
    return EXIT_FINDINGS if not well else EXIT_CLEAN


__all__ = ["fuzz_command"]
