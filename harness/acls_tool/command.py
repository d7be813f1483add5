"""``txnchaos acls``: add, list and remove ACLs in the shape of Kafka's ``kafka-acls.sh``
(``AclCommand``), over CreateAcls / DescribeAcls / DeleteAcls, against our cluster or
Apache Kafka with an authorizer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ...cluster.protocol.error_names import error_name
from ...cluster.security.acl import Operation, PatternType, ResourceType
from ...cluster.security.sasl import SaslCredentials
from ..cli_input import InputError, check_bootstrap
from ..transactions_tool.admin import AdminClient, AdminError, Unreachable
from ..transactions_tool.command_config import command_config_option
from . import model
from .model import AclInputError, Entry, Permission, Resource

T = TypeVar("T")


def _bootstrap(bootstrap: str | None, state_file: Path | None) -> str:
    if (bootstrap is None) == (state_file is None):
        raise click.UsageError("give either --bootstrap-server HOST:PORT or --state FILE")
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
    async def go() -> T:
        async with AdminClient(bootstrap, sasl) as admin:
            return await work(admin)

    try:
        return asyncio.run(go())
    except Unreachable as exc:
        raise InputError(f"cluster not reachable: {exc}") from exc
    except AdminError as exc:
        raise InputError(str(exc)) from exc


class Request:
    """The command line, checked as Kafka's AclCommandOptions checks it."""

    def __init__(self, options: dict[str, Any]) -> None:
        self.o = options
        actions = [a for a, key in (("add", "add"), ("remove", "remove"), ("list", "list_"))
                   if options[key]]  # fmt: skip
        if len(actions) != 1:
            raise click.UsageError("give exactly one action: --list, --add, --remove")
        self.action = actions[0]
        producer, consumer = options["producer"], options["consumer"]
        entry_options = ("allow_principal", "deny_principal", "allow_host", "deny_host")
        if self.action == "list":
            for name in ("producer", "consumer", *entry_options):
                if options[name]:
                    raise click.UsageError(f"--{name.replace('_', '-')} cannot be used with --list")
        elif options["principal"]:
            raise click.UsageError("--principal is only available with --list")
        if (producer or consumer) and (
            options["operation"] or options["deny_principal"] or options["deny_host"]
        ):
            raise click.UsageError(
                "--producer and --consumer imply their operations: no --operation, "
                "--deny-principal or --deny-host"
            )
        if producer and not options["topic"]:
            raise click.UsageError("with --producer you must give a --topic")
        if options["idempotent"] and not producer:
            raise click.UsageError("--idempotent is only available with --producer")
        if consumer and (
            not options["topic"]
            or not options["group"]
            or (not producer and (options["cluster"] or options["transactional_id"]))
        ):
            raise click.UsageError(
                "with --consumer you must give a --topic and a --group, and no --cluster or "
                "--transactional-id"
            )
        try:
            self.pattern = model.pattern_type(options["resource_pattern_type"])
            self.operations = [model.operation(op) for op in options["operation"]] or [
                Operation.ALL
            ]
            self.allow = [model.principal(p) for p in options["allow_principal"]]
            self.deny = [model.principal(p) for p in options["deny_principal"]]
            self.listed_principals = [model.principal(p) for p in options["principal"]]
        except AclInputError as exc:
            raise click.UsageError(str(exc)) from exc

    def resources(self, required: bool) -> list[Resource]:
        o, pattern = self.o, self.pattern
        out = [Resource(ResourceType.TOPIC, t.strip(), pattern) for t in o["topic"]]
        if pattern is PatternType.LITERAL and (o["cluster"] or o["idempotent"]):
            out.append(model.cluster_resource())
        out += [Resource(ResourceType.GROUP, g.strip(), pattern) for g in o["group"]]
        out += [Resource(ResourceType.TRANSACTIONAL_ID, t, pattern) for t in o["transactional_id"]]
        if not out and required:
            raise click.UsageError(
                "give at least one resource: --topic, --group, --transactional-id or --cluster"
            )
        return sorted(set(out))

    def _entries(self, operations: list[Operation]) -> set[Entry]:
        o = self.o
        return model.entries(
            self.allow, list(o["allow_host"]), operations, Permission.ALLOW
        ) | model.entries(self.deny, list(o["deny_host"]), operations, Permission.DENY)

    def acls(self) -> dict[Resource, set[Entry]]:
        """Resource -> the entries to add (or remove), with --producer / --consumer's
        roles as Kafka's tool builds them."""
        out: dict[Resource, set[Entry]] = {}
        o = self.o
        if not o["producer"] and not o["consumer"]:
            entries = self._entries(self.operations)
            out = {r: set(entries) for r in self.resources(required=True)}
        for r in self.resources(required=True):
            if o["producer"]:
                if r.resource_type is ResourceType.TOPIC:
                    ops = [Operation.WRITE, Operation.DESCRIBE, Operation.CREATE]
                    out.setdefault(r, set()).update(self._entries(ops))
                elif r.resource_type is ResourceType.TRANSACTIONAL_ID:
                    ops = [Operation.WRITE, Operation.DESCRIBE]
                    out.setdefault(r, set()).update(self._entries(ops))
                elif r.resource_type is ResourceType.CLUSTER and o["idempotent"]:
                    out.setdefault(r, set()).update(self._entries([Operation.IDEMPOTENT_WRITE]))
            if o["consumer"]:
                if r.resource_type is ResourceType.TOPIC:
                    ops = [Operation.READ, Operation.DESCRIBE]
                    out.setdefault(r, set()).update(self._entries(ops))
                elif r.resource_type is ResourceType.GROUP:
                    out.setdefault(r, set()).update(self._entries([Operation.READ]))
        try:
            for r, entries in out.items():
                model.check_operations(r, entries)
        except AclInputError as exc:
            raise click.UsageError(str(exc)) from exc
        return out


def _refused(what: str, results: list[tuple[int, str | None]]) -> None:
    bad = [(c, m) for c, m in results if c]
    if bad:
        code, message = bad[0]
        raise InputError(
            f"{what} refused: {error_name(code)}" + (f" ({message})" if message else "")
        )


async def _add(admin: AdminClient, request: Request, out: list[str]) -> dict[str, Any]:
    if request.pattern not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise click.UsageError(
            f"--resource-pattern-type {request.pattern.name.lower()} is not valid when adding "
            "ACLs (literal or prefixed)"
        )
    wanted = request.acls()
    if any(not entries for entries in wanted.values()):
        raise click.UsageError("give --allow-principal or --deny-principal to add ACLs")
    added: dict[str, list[dict[str, str]]] = {}
    for resource, entries in sorted(wanted.items()):
        existing = model.described(
            await admin.describe_acls(model.binding_filter(resource, None))
        ).get(resource, set())
        for e in sorted(entries & existing):
            out.append(f"Acl {resource} {e} already exists.")
        new = sorted(entries - existing)
        if not new:
            continue
        lines = "\n".join(f" \t{e}" for e in new)
        out.append(f"Adding ACLs for resource `{resource}`: \n{lines}\n")
        results = await admin.create_acls([model.creation(resource, e) for e in new])
        _refused("CreateAcls", results)
        added[str(resource)] = [e.to_json() for e in new]
    return {"added": added}


async def _remove(
    admin: AdminClient, request: Request, out: list[str], force: bool
) -> dict[str, Any]:
    wanted = request.acls() if request.allow or request.deny else {}
    if not wanted:  # no principal given: every ACL of each resource filter
        wanted = {r: set() for r in request.resources(required=True)}
    removed: list[dict[str, Any]] = []
    for resource, entries in sorted(wanted.items()):
        what = (
            f"all ACLs of resource filter `{resource}`"
            if not entries
            else "ACLs\n"
            + "\n".join(f" \t{e}" for e in sorted(entries))
            + f"\n from resource filter `{resource}`"
        )
        if not force and not click.confirm(f"Are you sure you want to remove {what}?"):
            continue
        filters = (
            [model.binding_filter(resource, None)]
            if not entries
            else [model.binding_filter(resource, e) for e in sorted(entries)]
        )
        r = await admin.delete_acls(filters)
        _refused("DeleteAcls", [(int(x.error_code), x.error_message) for x in r.filter_results])
        for x in r.filter_results:
            for m in x.matching_acls:
                removed.append(
                    {
                        **Resource(
                            ResourceType(int(m.resource_type)),
                            str(m.resource_name),
                            PatternType(int(m.pattern_type)),
                        ).to_json(),
                        **Entry(
                            str(m.principal),
                            str(m.host),
                            Operation(int(m.operation)),
                            Permission(int(m.permission_type)),
                        ).to_json(),
                    }
                )
        out.append(f"Removed {sum(len(x.matching_acls) for x in r.filter_results)} ACL(s) "
                   f"matching resource filter `{resource}`.")  # fmt: skip
    return {"removed": removed}


async def _list(admin: AdminClient, request: Request, out: list[str]) -> dict[str, Any]:
    filters: list[Resource | None] = list(request.resources(required=False)) or [None]
    found: dict[Resource, set[Entry]] = {}
    for f in filters:
        for resource, entries in model.described(
            await admin.describe_acls(model.binding_filter(f, None))
        ).items():
            found.setdefault(resource, set()).update(entries)
    principals = request.listed_principals
    if principals:
        for p in principals:
            mine = {r: {e for e in es if e.principal == p} for r, es in found.items()}
            mine = {r: es for r, es in mine.items() if es}
            out.append(f"ACLs for principal `{p}`")
            out.append(model.render(mine))
        found = {r: {e for e in es if e.principal in principals} for r, es in found.items()}
        found = {r: es for r, es in found.items() if es}
    else:
        out.append(model.render(found))
    return {
        "acls": [
            {**r.to_json(), "entries": [e.to_json() for e in sorted(es)]}
            for r, es in sorted(found.items())
        ]
    }


@click.command("acls")
@click.option("--add", is_flag=True, help="Add ACLs.")
@click.option("--remove", is_flag=True, help="Remove ACLs (asks first, unless --force).")
@click.option("--list", "list_", is_flag=True, help="List ACLs (of the resources given, or all).")
@click.option(
    "--bootstrap-server",
    "--bootstrap",
    "bootstrap",
    default=None,
    metavar="HOST:PORT",
    callback=check_bootstrap,
    help="Any Kafka-compatible cluster (HOST:PORT[,HOST:PORT...]).",
)
@click.option(
    "--state",
    "state_file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="The state file `cluster up --state` wrote (a local cluster).",
)
@command_config_option
@click.option("--topic", multiple=True, help="A topic (repeatable).")
@click.option("--group", multiple=True, help="A consumer group (repeatable).")
@click.option("--transactional-id", multiple=True, help="A transactional id (repeatable).")
@click.option("--cluster", is_flag=True, help="The cluster resource.")
@click.option(
    "--resource-pattern-type",
    default="literal",
    show_default=True,
    metavar="TYPE",
    help="literal or prefixed (adding); also any or match (listing, removing).",
)
@click.option("--allow-principal", multiple=True, metavar="TYPE:NAME", help="e.g. User:alice.")
@click.option("--deny-principal", multiple=True, metavar="TYPE:NAME")
@click.option("--allow-host", multiple=True, metavar="HOST", help="Default: * (every host).")
@click.option("--deny-host", multiple=True, metavar="HOST", help="Default: * (every host).")
@click.option(
    "--operation",
    multiple=True,
    metavar="NAME",
    help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
    "AlterConfigs, IdempotentWrite, TwoPhaseCommit or All (the default; repeatable).",
)
@click.option("--principal", multiple=True, metavar="TYPE:NAME", help="List this principal's.")
@click.option("--producer", is_flag=True, help="A producer's ACLs (topic Write/Describe/Create).")
@click.option(
    "--consumer", is_flag=True, help="A consumer's ACLs (topic Read/Describe, group Read)."
)
@click.option("--idempotent", is_flag=True, help="With --producer: IdempotentWrite on the cluster.")
@click.option("--force", is_flag=True, help="Remove without asking.")
@click.option("--json", "as_json", is_flag=True, help="JSON output, for scripts.")
def acls_command(**options: Any) -> None:
    """Add, list and remove ACLs, as Kafka's kafka-acls.sh (CreateAcls, DescribeAcls,
    DeleteAcls). Works against our cluster and Apache Kafka with an authorizer.

    Exit code 2 for bad arguments, an unreachable cluster or a refused request.
    """
    request = Request(options)
    target = _bootstrap(options["bootstrap"], options["state_file"])
    out: list[str] = []

    async def work(admin: AdminClient) -> dict[str, Any]:
        if request.action == "add":
            return await _add(admin, request, out)
        if request.action == "remove":
            return await _remove(admin, request, out, options["force"])
        return await _list(admin, request, out)

    result = _run(target, options["command_config"], work)
    if options["as_json"]:
        click.echo(json.dumps(result, indent=2, sort_keys=True))
    else:
        for line in out:
            click.echo(line)
