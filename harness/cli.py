"""The harness's commands: ``node``, ``cluster``, ``worker``, ``fuzz``, ``cleanup``,
``transactions``, ``acls``, ``conformance``.

The ``txnchaos`` command (jobs/cli.py) offers them beside the commands that run and judge
(``run``, ``analyze``, ``nightly``, ``repro``, ``shrink``, ``demo``). Nodes run through this
module (``python -m txnchaos.harness.cli node``), so importing it stays light: no heavy library
at import time (tests/harness/test_cli_imports.py)."""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import click

from ..cluster.settings import NodeSettings, SettingsError
from .acls_tool.command import acls_command
from .cleanup import cleanup_command
from .cli_input import LOG_LEVEL, PORT, Cli, InputError, check_kafka_version
from .conformance.cli import conformance_command
from .fuzz.command import fuzz_command
from .launch.local import LaunchError, LocalCluster
from .run.worker_cli import worker_command
from .transactions_tool.command import transactions_command
from .transactions_tool.command_config import command_config_option

if TYPE_CHECKING:
    from ..cluster.security.sasl import SaslCredentials
    from .launch.kafka.cluster import KafkaCluster

    AnyCluster = LocalCluster | KafkaCluster

#: a directory option: a file there is refused up front (it may not exist yet)
DIRECTORY = click.Path(file_okay=False, path_type=Path)
#: a file option (--state): a directory there is refused up front
FILE = click.Path(dir_okay=False, path_type=Path)


def _address(value: str, option: str = "--controller") -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise click.BadParameter(f"expected HOST:PORT, got {value!r}", param_hint=option)
    return host, int(port)


def _ids(value: str) -> tuple[int, ...]:
    try:
        return tuple(int(v) for v in value.split(",") if v.strip())
    except ValueError:
        raise click.BadParameter(
            f"expected comma-separated node ids, got {value!r}", param_hint="--coordinator-ids"
        ) from None


def _peer(value: str) -> tuple[int, tuple[str, int]]:
    node, sep, address = value.partition("=")
    if not sep or not node.strip().isdigit():
        raise click.BadParameter(f"expected ID=HOST:PORT, got {value!r}", param_hint="--peer")
    return int(node), _address(address, "--peer")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    from .version import version_text

    click.echo(version_text())
    ctx.exit()


#: ``--version`` of a ``txnchaos`` command group (this one and jobs/cli.py's, which adds the
#: commands that run and judge to these)
version_option = click.option(
    "--version",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version (and the client libraries') and exit.",
)


@click.group(name="txnchaos", cls=Cli, context_settings={"help_option_names": ["-h", "--help"]})
@version_option
def main() -> None:
    """txnchaos: chaos testing for transactional (exactly-once) Kafka messaging.

    It runs its own Kafka-protocol cluster (`cluster`, `node`), drives workloads
    through faults, and judges the outcome.

    Exit codes: 0 valid, 1 anomalies found, 2 the harness failed or the input is bad
    (one line on stderr names it).
    """


def _check_writable(path: Path, what: str) -> None:
    """Refuse a file path that cannot be written before anything starts: a cluster started
    whose state file then cannot be written would be left running unannounced."""
    parent = path.resolve().parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"cannot write {what} {path}: {parent} is not a directory")
    if not os.access(parent if not path.exists() else path, os.W_OK):
        raise InputError(f"cannot write {what} {path}: permission denied")


# ---- txnchaos node -------------------------------------------------------------------
@main.command()
@click.option(
    "--id",
    "node_id",
    type=click.IntRange(0, 2**31 - 1),
    required=True,
    help="Node id (unique in the cluster).",
)
@click.option(
    "--roles",
    default="broker,coordinator",
    show_default=True,
    help="Comma-separated roles: broker, coordinator.",
)
@click.option("--data-dir", type=DIRECTORY, required=True, help="Node data.")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=PORT, default=0, show_default=True, help="Port (0: pick a free one).")
@click.option("--advertised-host", default=None, help="Host clients are told (default: --host).")
@click.option("--advertised-port", type=PORT, default=None, help="Port clients are told.")
@click.option(
    "--controller",
    default=None,
    help="HOST:PORT of the node hosting the controller; omit on that node itself.",
)
@click.option("--metrics-host", default="127.0.0.1", show_default=True)
@click.option("--metrics-port", type=PORT, default=0, show_default=True, help="0: pick a free one.")
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Broker setting.")
@click.option(
    "--coordinator-ids",
    default=None,
    help="Comma-separated ids of the cluster's coordinator nodes (same on every node).",
)
@click.option(
    "--peer",
    "peers",
    multiple=True,
    metavar="ID=HOST:PORT",
    help="Reach node ID at HOST:PORT instead of its advertised address (e.g. a proxy).",
)
@click.option(
    "--cpus",
    default=None,
    metavar="LIST",
    help="Run only on these CPUs, e.g. 1 or 0-1,4, batch-scheduled (Linux; see "
    "`cluster up --cpus`).",
)
@click.option("--log-level", type=LOG_LEVEL, default="INFO", show_default=True)
def node(
    node_id: int,
    roles: str,
    data_dir: Path,
    host: str,
    port: int,
    advertised_host: str | None,
    advertised_port: int | None,
    controller: str | None,
    metrics_host: str,
    metrics_port: int,
    settings: tuple[str, ...],
    coordinator_ids: str | None,
    peers: tuple[str, ...],
    cpus: str | None,
    log_level: str,
) -> None:
    """Run one node in the foreground (what `cluster up` and the Docker image run).

    The node writes DATA_DIR/node.json with its pid and ports once it serves, and
    stops cleanly on SIGTERM or Ctrl-C.
    """
    from ..cluster.cpu_placement import CpuListError, place_this_process
    from ..cluster.node import NodeConfig, run_node

    if cpus is not None:
        try:
            place_this_process(cpus)  # first: threads started later inherit it
        except CpuListError as exc:
            raise click.BadParameter(str(exc), param_hint="--cpus") from exc

    from ..cluster.log_format import use_escaping_formatter

    log_format = f"%(asctime)s node-{node_id} %(levelname)s %(name)s: %(message)s"
    logging.basicConfig(level=log_level.upper(), format=log_format)
    use_escaping_formatter(log_format)  # a newline in a client's id forges no line
    try:
        config = NodeConfig(
            node_id=node_id,
            roles=frozenset(r.strip() for r in roles.split(",") if r.strip()),
            data_dir=data_dir,
            host=host,
            port=port,
            advertised_host=advertised_host,
            advertised_port=advertised_port,
            controller=_address(controller) if controller else None,
            metrics_host=metrics_host,
            metrics_port=metrics_port,
            settings=NodeSettings.from_pairs(list(settings)),
            coordinator_ids=_ids(coordinator_ids) if coordinator_ids else None,
            peers=dict(_peer(p) for p in peers),
        )
    except (SettingsError, ValueError) as exc:
        raise click.UsageError(str(exc)) from exc
    try:
        run_node(config)
    except OSError as exc:  # the data directory, or the address to bind
        raise InputError(f"node {node_id}: {exc}") from exc


# ---- txnchaos cluster ----------------------------------------------------------------
@main.group()
def cluster() -> None:
    """Start, stop, kill and restart a local cluster: txnchaos nodes, or Apache Kafka's
    (`cluster up --launcher kafka`)."""


@cluster.command("up")
@click.option("--brokers", type=int, default=1, show_default=True)
@click.option(
    "--coordinators",
    type=int,
    default=0,
    show_default=True,
    help="Coordinator nodes (0: the coordinator role runs inside broker 1).",
)
@click.option("--data-dir", type=DIRECTORY, required=True)
@click.option("--set", "settings", multiple=True, metavar="KEY=VALUE", help="Broker setting.")
@click.option(
    "--cpus",
    default=None,
    metavar="LIST",
    help="Run every node on these CPUs only, e.g. 1 or 0-1,4, batch-scheduled (Linux). "
    "On a small VM, nodes sharing a core apart from the clients use less CPU per "
    "transaction: their messages to each other need no cross-core wake-up, and a "
    "woken node does not preempt the sender. Kept for restarts; `--cpus all` drops it.",
)
@click.option("--detach", is_flag=True, help="Return once every node serves.")
@click.option(
    "--state",
    "state_file",
    type=FILE,
    default=None,
    help="Write the cluster state (bootstrap, nodes, pids, ports) here as JSON.",
)
@click.option(
    "--launcher",
    type=click.Choice(["local", "kafka"]),
    default="local",
    show_default=True,
    help="local: the project's nodes; kafka: Apache Kafka's own release as JVMs (brokers "
    "1..N, KRaft controllers 1001.. for --coordinators; docs/apache-kafka.md).",
)
@click.option(
    "--kafka-version",
    default=None,
    metavar="X.Y.Z",
    callback=check_kafka_version,
    help="The Apache Kafka release (with --launcher kafka; default 4.4.0).",
)
def cluster_up(
    brokers: int,
    coordinators: int,
    data_dir: Path,
    settings: tuple[str, ...],
    cpus: str | None,
    detach: bool,
    state_file: Path | None,
    launcher: str,
    kafka_version: str | None,
) -> None:
    """Start the nodes as local processes on 127.0.0.1 with ports they pick.

    Running it again on an existing DATA_DIR restarts that cluster with its data.
    Without --detach it stays in the foreground and stops the cluster on Ctrl-C.
    """
    if state_file is not None:
        _check_writable(state_file, "state file")
    if kafka_version is not None and launcher != "kafka":
        raise click.UsageError("--kafka-version is for --launcher kafka")
    local: AnyCluster
    try:
        if launcher == "kafka":
            from .launch.kafka.cluster import KafkaCluster
            from .launch.kafka.release import DEFAULT_VERSION

            if cpus is not None:
                raise InputError("--cpus: the kafka launcher does not place its JVMs on CPUs")
            local = KafkaCluster.prepare(
                data_dir,
                kafka_version or DEFAULT_VERSION,
                brokers,
                coordinators,
                list(settings),
                tie_to_harness=not detach,
            )
        else:
            NodeSettings.from_pairs(list(settings))
            local = LocalCluster.prepare(data_dir, brokers, coordinators, list(settings), cpus=cpus)
        local.up()
    except (LaunchError, SettingsError) as exc:
        raise InputError(str(exc)) from exc
    except OSError as exc:  # the data directory cannot be made or written
        raise InputError(f"data directory {data_dir}: {exc.strerror or exc}") from exc
    if state_file is not None:
        local.write_state(state_file)
    state = local.state()
    click.echo(f"cluster up: bootstrap {state['bootstrap']}")
    for n in state["nodes"]:
        click.echo(
            f"  node {n['id']:>5} {n['role']:<20} pid {n['pid']:<8} "
            f"port {n['port']:<6} metrics {n['metrics_port']}"
        )
    if detach:
        target = f"--state {state_file}" if state_file is not None else f"--data-dir {data_dir}"
        click.echo(f"stop it with: txnchaos cluster down {target}")
        return
    click.echo("running; Ctrl-C stops the cluster")
    try:
        import signal

        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        local.down()
        if state_file is not None:
            local.write_state(state_file)
        click.echo("cluster stopped")


def _target_options(f: Callable[..., None]) -> Callable[..., None]:
    """``--state FILE`` or ``--data-dir DIR``: which local cluster a command acts on."""
    f = click.option(
        "--data-dir",
        type=DIRECTORY,
        default=None,
        help="The cluster's data directory (for a cluster started without --state).",
    )(f)
    return click.option(
        "--state",
        "state_file",
        type=FILE,
        default=None,
        help="The state file `cluster up --state` wrote (kept up to date).",
    )(f)


def _load(state_file: Path | None, data_dir: Path | None) -> AnyCluster:
    """The cluster a command acts on: the project's nodes, or Apache Kafka's JVMs (a state
    file whose flavour is apache-kafka, a data directory with kafka-cluster.json)."""
    from .launch.kafka.cluster import KafkaCluster
    from .launch.kafka.layout import LAYOUT_FILE

    if (state_file is None) == (data_dir is None):
        raise click.UsageError("give either --state FILE or --data-dir DIR")
    try:
        if state_file is not None:
            kafka_dir = _kafka_data_dir(state_file)
            if kafka_dir is not None:
                return KafkaCluster.from_data_dir(kafka_dir)
            return LocalCluster.from_state(state_file)
        assert data_dir is not None
        if (data_dir / LAYOUT_FILE).exists():
            return KafkaCluster.from_data_dir(data_dir)
        return LocalCluster.from_data_dir(data_dir)
    except LaunchError as exc:
        raise InputError(str(exc)) from exc


def _kafka_data_dir(state_file: Path) -> Path | None:
    """The data directory of an Apache Kafka cluster's state file (None: another kind; the
    project's own reading of the file then says what is wrong with it)."""
    try:
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if isinstance(state, dict) and state.get("flavour") == "apache-kafka":
        if not isinstance(state.get("data_dir"), str):
            raise InputError(f"state file {state_file} has no 'data_dir' string")
        return Path(state["data_dir"])
    return None


def _save(local: AnyCluster, state_file: Path | None) -> None:
    if state_file is not None:
        local.write_state(state_file)


@cluster.command("down")
@_target_options
def cluster_down(state_file: Path | None, data_dir: Path | None) -> None:
    """Stop every node (SIGTERM, then SIGKILL after a grace period)."""
    local = _load(state_file, data_dir)
    local.down()
    _save(local, state_file)
    click.echo("cluster stopped")


def _node_action(state_file: Path | None, data_dir: Path | None, node_id: int, action: str) -> None:
    local = _load(state_file, data_dir)
    try:
        getattr(local, f"{action}_node")(node_id)
    except LaunchError as exc:
        raise InputError(str(exc)) from exc
    _save(local, state_file)
    click.echo(f"node {node_id} {action}ed")


@cluster.command("kill")
@_target_options
@click.argument("node_id", type=int)
def cluster_kill(state_file: Path | None, data_dir: Path | None, node_id: int) -> None:
    """SIGKILL one node (no clean shutdown)."""
    _node_action(state_file, data_dir, node_id, "kill")


@cluster.command("restart")
@_target_options
@click.argument("node_id", type=int)
def cluster_restart(state_file: Path | None, data_dir: Path | None, node_id: int) -> None:
    """Restart one node with the same ports and data."""
    _node_action(state_file, data_dir, node_id, "restart")


@cluster.command("status")
@_target_options
def cluster_status(state_file: Path | None, data_dir: Path | None) -> None:
    """Print the cluster state, with whether each node's process is alive."""
    from .launch.local import is_our_node

    local = _load(state_file, data_dir)
    state = local.state()
    for n in state["nodes"]:
        if isinstance(local, LocalCluster):
            n["alive"] = bool(n["pid"]) and is_our_node(n["pid"], n["id"])
        else:
            n["alive"] = local.alive(n["id"])
    click.echo(json.dumps(state, indent=2))


@cluster.command("features")
@_target_options
@click.option("--set", "changes", multiple=True, metavar="FEATURE=LEVEL", help="New level.")
@click.option("--validate-only", is_flag=True, help="Check the change without making it.")
@command_config_option
def cluster_features(
    state_file: Path | None,
    data_dir: Path | None,
    changes: tuple[str, ...],
    validate_only: bool,
    command_config: SaslCredentials | None,
) -> None:
    """Show the finalized features (transaction.version), or change them with
    UpdateFeatures (a lower level is sent as a safe downgrade). On a SASL cluster, log in
    with --command-config (an admin: UpdateFeatures needs ALTER on the cluster)."""
    from ..cluster.net.client import PeerAuthenticationFailed
    from .features_admin import FeatureChangeRefused, features

    wanted: dict[str, int] = {}
    for pair in changes:
        name, sep, level = pair.partition("=")
        if not sep or not level.strip().lstrip("-").isdigit():
            raise click.BadParameter(f"expected FEATURE=LEVEL, got {pair!r}", param_hint="--set")
        wanted[name.strip()] = int(level)
    local = _load(state_file, data_dir)
    try:
        result = features(local.state()["bootstrap"], wanted, validate_only, command_config)
    except FeatureChangeRefused as exc:
        raise InputError(f"update refused: {exc}") from exc
    except PeerAuthenticationFailed as exc:
        raise InputError(f"SASL authentication failed: {exc}") from exc
    except OSError as exc:
        hint = "" if command_config else " (a SASL cluster: log in with --command-config FILE)"
        raise InputError(f"cluster not reachable: {exc}{hint}") from exc
    click.echo(json.dumps(result.to_json(), indent=2))


# ---- txnchaos fuzz, cleanup, worker -------------------------------------------------------
main.add_command(fuzz_command)
main.add_command(cleanup_command)
main.add_command(worker_command)


# ---- txnchaos transactions (KIP-664) ---------------------------------------------------
main.add_command(transactions_command)
main.add_command(acls_command)  # Kafka's kafka-acls.sh (docs/conformance.md)
main.add_command(conformance_command)


if __name__ == "__main__":
    main(prog_name="txnchaos")  # not "python -m txnchaos.harness.cli" in messages (nodes)
