"""``txnchaos transactions``: KIP-664's hanging-transaction tool (Kafka's
``kafka-transactions.sh``) against any cluster that serves its APIs."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ...cluster.security.sasl import SaslCredentials
from ..cli_input import Duration, InputError, check_bootstrap
from . import output, verbs
from .admin import AdminClient, AdminError, Unreachable
from .command_config import command_config_option

T = TypeVar("T")
#: The states a coordinator reports (Kafka's TransactionState names): a filter naming any
#: other would silently match nothing.
TRANSACTION_STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
    "Dead",
)
BROKER = click.IntRange(min=0)
OFFSET = click.IntRange(min=0)


def _target(f: Callable[..., None]) -> Callable[..., None]:
    """``--bootstrap HOST:PORT`` or ``--state FILE``, ``--command-config FILE`` and ``--json``."""
    f = click.option("--json", "as_json", is_flag=True, help="JSON output, for scripts.")(f)
    f = command_config_option(f)
    f = click.option(
        "--state",
        "state_file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="The state file `cluster up --state` wrote (a local cluster).",
    )(f)
    return click.option(
        "--bootstrap",
        "--bootstrap-server",
        "bootstrap",
        default=None,
        metavar="HOST:PORT",
        callback=check_bootstrap,
        help="Any Kafka-compatible cluster (HOST:PORT[,HOST:PORT...]; --bootstrap-server "
        "as Kafka's tool spells it).",
    )(f)


def _bootstrap(bootstrap: str | None, state_file: Path | None) -> str:
    if (bootstrap is None) == (state_file is None):
        raise click.UsageError("give either --bootstrap HOST:PORT or --state FILE")
    if bootstrap is not None:
        return bootstrap
    from ..launch.local import LaunchError, LocalCluster

    assert state_file is not None
    try:
        return str(LocalCluster.from_state(state_file).state()["bootstrap"])
    except LaunchError as exc:
        raise InputError(str(exc)) from exc


def _run(
    bootstrap: str, sasl: SaslCredentials | None, work: Callable[[AdminClient], Awaitable[T]]
) -> T:
    """Run ``work`` with an admin client; cluster errors become exit code 2."""

    async def go() -> T:
        async with AdminClient(bootstrap, sasl) as admin:
            return await work(admin)

    try:
        return asyncio.run(go())
    except Unreachable as exc:
        raise InputError(f"cluster not reachable: {exc}") from exc
    except AdminError as exc:
        raise InputError(str(exc)) from exc


def _now_ms() -> int:
    return int(time.time() * 1000)


@click.group("transactions")
def transactions_command() -> None:
    """Find, inspect and abort hanging transactions (KIP-664's kafka-transactions.sh).

    Exit code 2 for bad arguments, an unreachable cluster or a refused request.
    """


@transactions_command.command("list")
@_target
@click.option("--broker", type=BROKER, default=None, help="Only this broker's coordinator.")
@click.option(
    "--state-filter",
    "states",
    multiple=True,
    type=click.Choice(TRANSACTION_STATES),
    help="Only in this state (repeatable).",
)
@click.option(
    "--producer-id-filter", "producer_ids", type=int, multiple=True, help="Only this producer id."
)
@click.option(
    "--duration-filter",
    type=Duration(unit="ms"),
    default=None,
    help="Only transactions running longer than this (ListTransactions v1): a duration, a "
    "bare number in milliseconds as Kafka's tool takes it (3600000, or 1h).",
)
@click.option(
    "--transactional-id-pattern",
    default=None,
    metavar="REGEX",
    help="Only ids this regular expression matches (ListTransactions v2).",
)
def list_command(
    bootstrap: str | None,
    state_file: Path | None,
    command_config: SaslCredentials | None,
    as_json: bool,
    broker: int | None,
    states: tuple[str, ...],
    producer_ids: tuple[int, ...],
    duration_filter: float | None,
    transactional_id_pattern: str | None,
) -> None:
    """List the transactions the coordinators know (ListTransactions)."""
    target = _bootstrap(bootstrap, state_file)
    items = _run(
        target,
        command_config,
        lambda admin: verbs.list_transactions(
            admin,
            broker,
            states=list(states),
            producer_ids=list(producer_ids),
            duration_ms=-1 if duration_filter is None else round(duration_filter * 1000),
            pattern=transactional_id_pattern,
        ),
    )
    click.echo(output.listing(items, as_json))


@transactions_command.command("describe")
@_target
@click.option("--transactional-id", required=True, help="The transactional id.")
def describe_command(
    bootstrap: str | None,
    state_file: Path | None,
    command_config: SaslCredentials | None,
    as_json: bool,
    transactional_id: str,
) -> None:
    """Describe one transactional id's transaction at its coordinator (DescribeTransactions)."""
    target = _bootstrap(bootstrap, state_file)
    d = _run(target, command_config, lambda admin: verbs.describe(admin, transactional_id))
    click.echo(output.description(d, as_json))


@transactions_command.command("describe-producers")
@_target
@click.option("--topic", required=True)
@click.option("--partition", type=OFFSET, required=True)
@click.option("--broker", type=BROKER, default=None, help="This replica instead of the leader.")
def describe_producers_command(
    bootstrap: str | None,
    state_file: Path | None,
    command_config: SaslCredentials | None,
    as_json: bool,
    topic: str,
    partition: int,
    broker: int | None,
) -> None:
    """The active producers of a partition (DescribeProducers)."""
    target = _bootstrap(bootstrap, state_file)
    items = _run(
        target,
        command_config,
        lambda admin: verbs.describe_producers(admin, topic, partition, broker),
    )
    click.echo(output.producers(items, _now_ms(), as_json))


@transactions_command.command("find-hanging")
@_target
@click.option("--broker", type=BROKER, default=None, help="Search this broker's replicas.")
@click.option("--topic", default=None, help="Search this topic.")
@click.option(
    "--partition", type=OFFSET, default=None, help="Search one partition (needs --topic)."
)
@click.option(
    "--max-transaction-timeout",
    type=Duration(unit="m"),
    default="15m",
    show_default=True,
    help="How long a transaction may stay open (the cluster's transaction.max.timeout.ms): a "
    "duration, a bare number in minutes as Kafka's tool takes it (15, or 15m).",
)
def find_hanging_command(
    bootstrap: str | None,
    state_file: Path | None,
    command_config: SaslCredentials | None,
    as_json: bool,
    broker: int | None,
    topic: str | None,
    partition: int | None,
    max_transaction_timeout: float,
) -> None:
    """Open transactions older than the maximum timeout that no coordinator will end.

    Exit code 1 when a broker did not answer: the search went on without it, and what it
    could not look at is named on stderr."""
    if topic is None and broker is None:
        raise click.UsageError("find-hanging needs --topic or --broker to limit the search")
    if partition is not None and topic is None:
        raise click.UsageError("--partition needs --topic")
    target = _bootstrap(bootstrap, state_file)
    now = _now_ms()
    found = _run(
        target,
        command_config,
        lambda admin: verbs.find_hanging(
            admin,
            broker=broker,
            topic=topic,
            partition=partition,
            max_transaction_timeout_ms=round(max_transaction_timeout * 1000),
            now_ms=now,
        ),
    )
    click.echo(output.hanging(found.hanging, now, as_json))
    if not found.complete:
        for node, why in sorted(found.unreachable.items()):
            click.echo(f"warning: broker {node} did not answer: {why}", err=True)
        if found.unsearched:
            names = ", ".join(f"{t}-{p}" for t, p in sorted(found.unsearched))
            click.echo(f"warning: not searched (leader down): {names}", err=True)
        for c in found.unchecked:
            click.echo(
                f"warning: not judged (its coordinator may be down): {c.topic}-{c.partition} "
                f"producer {c.producer.producer_id} epoch {c.producer.producer_epoch} from "
                f"offset {c.producer.start_offset}",
                err=True,
            )
        raise SystemExit(1)  # a partial answer: what was found is printed above


@transactions_command.command("abort")
@_target
@click.option("--topic", required=True)
@click.option("--partition", type=OFFSET, required=True)
@click.option("--start-offset", type=OFFSET, default=None, help="Where the transaction starts.")
@click.option("--producer-id", type=click.IntRange(min=0), default=None, help="(older brokers)")
@click.option("--producer-epoch", type=click.IntRange(0, 32767), default=None)
@click.option("--coordinator-epoch", type=click.IntRange(min=-1), default=None)
def abort_command(
    bootstrap: str | None,
    state_file: Path | None,
    command_config: SaslCredentials | None,
    as_json: bool,
    topic: str,
    partition: int,
    start_offset: int | None,
    producer_id: int | None,
    producer_epoch: int | None,
    coordinator_epoch: int | None,
) -> None:
    """Abort a partition's open transaction (WriteTxnMarkers; needs CLUSTER_ACTION).

    Give --start-offset (checked with DescribeProducers first), or, for brokers without
    DescribeProducers, --producer-id, --producer-epoch and --coordinator-epoch."""
    legacy = (producer_id, producer_epoch, coordinator_epoch)
    if start_offset is None and all(v is None for v in legacy):
        raise click.UsageError(
            "give --start-offset, or --producer-id, --producer-epoch and --coordinator-epoch"
        )
    if start_offset is not None and any(v is not None for v in legacy):
        raise click.UsageError("--start-offset excludes --producer-id/--producer-epoch/...")
    if start_offset is None and any(v is None for v in legacy):
        raise click.UsageError(
            "--producer-id, --producer-epoch and --coordinator-epoch go together"
        )
    target = _bootstrap(bootstrap, state_file)

    async def work(admin: AdminClient) -> Any:
        if start_offset is not None:
            spec = await verbs.abort_spec_for_offset(admin, topic, partition, start_offset)
        else:
            assert producer_id is not None and producer_epoch is not None
            assert coordinator_epoch is not None
            spec = verbs.spec_for(topic, partition, producer_id, producer_epoch, coordinator_epoch)
        await verbs.abort(admin, spec)
        return spec

    spec = _run(target, command_config, work)
    if as_json:
        import json

        click.echo(
            json.dumps(
                {
                    "aborted": True,
                    "topic": spec.topic,
                    "partition": spec.partition,
                    "producer_id": spec.producer_id,
                    "producer_epoch": spec.producer_epoch,
                    "coordinator_epoch": spec.coordinator_epoch,
                }
            )
        )
    else:
        click.echo(
            f"aborted the transaction of producer {spec.producer_id} (epoch "
            f"{spec.producer_epoch}) on {spec.topic}-{spec.partition}"
        )


@transactions_command.command("force-terminate")
@_target
@click.option("--transactional-id", required=True, help="The transactional id.")
def force_terminate_command(
    bootstrap: str | None,
    state_file: Path | None,
    command_config: SaslCredentials | None,
    as_json: bool,
    transactional_id: str,
) -> None:
    """Abort a transactional id's open transaction, even a prepared two-phase-commit one
    (KIP-939; InitProducerId with KeepPreparedTxn false: its producer is fenced)."""
    if not transactional_id:
        raise click.BadParameter("must not be empty", param_hint="--transactional-id")
    target = _bootstrap(bootstrap, state_file)
    pid, epoch = _run(
        target, command_config, lambda admin: verbs.force_terminate(admin, transactional_id)
    )
    if as_json:
        import json

        click.echo(
            json.dumps(
                {
                    "terminated": True,
                    "transactional_id": transactional_id,
                    "producer_id": pid,
                    "producer_epoch": epoch,
                }
            )
        )
    else:
        click.echo(
            f"terminated the transaction of {transactional_id!r}; its producer id is now "
            f"{pid} at epoch {epoch}"
        )
