"""``txnchaos conformance``: the differential conformance suite's command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..cli_input import InputError

AGAINST_HELP = (
    "kafka[:VERSION] runs every probe live on Apache Kafka's release (default: the kafka "
    "launcher's) and on our cluster; recorded[:FILE] compares our cluster with Kafka's "
    "recorded answers (default: the recording committed with the suite)."
)


def _against(value: str) -> tuple[str, str | None]:
    kind, _, arg = value.partition(":")
    if kind not in ("kafka", "recorded") or (kind == "kafka" and _ == ":" and not arg):
        raise click.BadParameter(
            f"expected kafka[:VERSION] or recorded[:FILE], got {value!r}", param_hint="--against"
        )
    return kind, arg or None


@click.command(name="conformance")
@click.option("--against", "against", default="recorded", show_default=True, help=AGAINST_HELP)
@click.option(
    "--record",
    "record",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Run the probes on Apache Kafka only and write its outcomes to FILE (JSON); "
    "with --probe, the chosen probes replace theirs in an existing FILE.",
)
@click.option(
    "--set",
    "settings",
    multiple=True,
    metavar="KEY=VALUE",
    help="A setting added to every configuration, on both clusters (txnchaos.* settings, "
    "such as bug switches, on our cluster only).",
)
@click.option(
    "--probe",
    "patterns",
    multiple=True,
    metavar="GLOB",
    help="Run only probes whose name, base name or tag matches (repeatable): "
    "'kip890.*', 'KIP-939', '*[tv1]'.",
)
@click.option("--list", "list_only", is_flag=True, help="List the probes and exit.")
@click.option(
    "--markdown",
    is_flag=True,
    help="With --list: the catalogue and the explained differences as Markdown "
    "(docs/conformance.md's tables).",
)
@click.option(
    "--json",
    "json_out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Also write every row (probe, both outcomes, status) to FILE.",
)
@click.option(
    "--work-dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the clusters keep their data (default: a temporary directory, removed).",
)
@click.option(
    "--jobs",
    type=click.IntRange(1, 16),
    default=3,
    show_default=True,
    help="Configurations probed at once on each side (each runs its own cluster of one "
    "broker; Apache Kafka's JVMs take about 0.5 GiB each).",
)
@click.option(
    "-v", "--verbose", is_flag=True, help="Say what runs, configuration by configuration."
)
def conformance_command(
    against: str,
    record: Path | None,
    settings: tuple[str, ...],
    patterns: tuple[str, ...],
    list_only: bool,
    markdown: bool,
    json_out: Path | None,
    work_dir: Path | None,
    jobs: int,
    verbose: bool,
) -> None:
    """Probe Apache Kafka and our cluster with the same raw requests and compare.

    Every probe is a short sequence of requests (exact versions and fields) and the
    normalised outcome (error names, ids and epochs relative to the first seen, what a
    read_committed fetch returns, LSO, DescribeTransactions/DescribeProducers, the state
    after a restart). Prints probe x (Kafka, ours, equal?). Exit 0 only when every probe
    is equal or its difference is explained (docs/conformance.md); 1 when one differs;
    2 on bad input or a cluster that would not start.
    """
    from ..launch.errors import LaunchError
    from ..launch.kafka.release import DEFAULT_VERSION, KafkaRelease
    from . import recorded as rec
    from .catalogue import select
    from .report import compare, passed, render
    from .runner import KafkaSide, OurSide, run_probes

    kind, arg = _against(against)
    extra = [_setting(s) for s in settings]
    from ...cluster.settings import NodeSettings, SettingsError

    try:
        NodeSettings.from_pairs(extra)  # both clusters take them: ours must know them
    except SettingsError as exc:
        raise click.BadParameter(str(exc), param_hint="--set") from None
    probes = select(patterns)
    if not probes:
        raise InputError(f"no probe matches {' '.join(patterns)} (see --list)")
    if list_only and markdown:
        from .catalogue import markdown as catalogue_markdown
        from .explained import markdown as explained_markdown

        click.echo(catalogue_markdown(probes))
        click.echo()
        click.echo(explained_markdown())
        return
    if list_only:
        for p in probes:
            click.echo(f"{p.name:<60} {','.join(p.tags):<16} {p.doc}")
        click.echo(f"{len(probes)} probes")
        return
    if record is not None and kind == "recorded" and against != "recorded":
        raise InputError("--record runs Apache Kafka: use it with --against kafka[:VERSION]")
    version = arg if kind == "kafka" and arg else DEFAULT_VERSION
    try:
        KafkaRelease.parse(version)
    except LaunchError:
        raise InputError(
            f"--against kafka:{version}: expected a release such as {DEFAULT_VERSION}"
        ) from None

    def say(line: str) -> None:
        if verbose:
            click.echo(line, err=True)

    try:
        if record is not None:
            kafka_side = KafkaSide(version)
            outcomes = run_probes(kafka_side, probes, extra, work_dir, say, jobs)
            entries: dict[str, dict[str, object]] = {}
            if patterns and record.exists():
                old = rec.read(record)
                if old.cluster == kafka_side.label():
                    entries.update(old.probes)
            for p in probes:
                entries[p.name] = {
                    "settings": p.kafka_settings(extra),
                    "outcome": outcomes[p.name],
                }
            kafka_extra = [s for s in extra if not s.startswith("txnchaos.")]
            rec.write(record, kafka_side.label(), kafka_extra, entries)
            failed = [n for n, o in outcomes.items() if "probe-failed" in o]
            click.echo(
                f"recorded {len(outcomes)} probes of {kafka_side.label()} in {record}"
                + (f" ({len(failed)} failed on Kafka: {', '.join(failed)})" if failed else "")
            )
            return
        problems: dict[str, str] = {}
        if kind == "recorded":
            path = Path(arg) if arg else rec.DEFAULT
            recording = rec.read(path)
            kafka_label = f"{recording.cluster} (recorded: {path.name})"
            kafka_outcomes = {p.name: recording.outcome(p.name) for p in probes}
            for p in probes:
                want = p.kafka_settings(extra)
                got = recording.settings(p.name)
                if got is not None and got != want:
                    problems[p.name] = f"recorded with {' '.join(got)}; this run: {' '.join(want)}"
        else:
            kafka_side = KafkaSide(version)
            kafka_label = kafka_side.label()
            kafka_outcomes = dict(run_probes(kafka_side, probes, extra, work_dir, say, jobs))
        ours_side = OurSide()
        ours = run_probes(ours_side, probes, extra, work_dir, say, jobs)
    except (LaunchError, rec.RecordingError) as exc:
        raise InputError(str(exc)) from None
    rows = compare(probes, kafka_outcomes, ours, problems)
    click.echo(render(rows, kafka_label, ours_side.label()))
    if json_out is not None:
        json_out.write_text(json.dumps([r.to_dict() for r in rows], indent=1) + "\n")
    if not passed(rows):
        sys.exit(1)


def _setting(pair: str) -> str:
    key, sep, value = pair.partition("=")
    if not sep or not key.strip():
        raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint="--set")
    return f"{key.strip()}={value.strip()}"
