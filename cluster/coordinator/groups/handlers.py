"""Kafka wire handlers of the group coordinator: kio requests in, kio responses out.

Each handler reads the fields its request version has (``getattr`` with the
version's absent-field default), calls the version-independent core in
``coordinator.py`` and describes the response once as a dict holding the union of
every version's fields; ``ctx.respond`` keeps those the negotiated version has.
"""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any

from ...server.dispatch import RequestContext
from .offset_commit_shape import commit_entries, partition_errors

if TYPE_CHECKING:
    from .coordinator import GroupCoordinator

OWNER = "group-coordinator"

# api key -> (min version, max version) served
VERSIONS: dict[int, tuple[int, int]] = {
    8: (2, 9),  # OffsetCommit
    9: (1, 9),  # OffsetFetch
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 5),  # DescribeGroups
    16: (0, 4),  # ListGroups
    42: (0, 2),  # DeleteGroups
}

# READ, DELETE, DESCRIBE: what DescribeGroups reports as authorized (no ACLs here).
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)


def _ms(value: Any, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, datetime.timedelta):
        return int(value / datetime.timedelta(milliseconds=1))
    return int(value)


def _client_host(ctx: RequestContext) -> str:
    host = ctx.peer.rsplit(":", 1)[0] if ctx.peer else ""
    return f"/{host.strip('[]')}" if host else ""


class GroupApis:
    """The request handlers, bound to one coordinator."""

    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.c = coordinator

    async def join_group(self, ctx: RequestContext, req: Any) -> Any:
        session_ms = _ms(req.session_timeout, 0)
        result = await self.c.join_group(
            req.group_id,
            req.member_id,
            protocol_type=req.protocol_type,
            protocols=[(p.name, bytes(p.metadata)) for p in req.protocols],
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=_ms(getattr(req, "rebalance_timeout", None), session_ms),
            group_instance_id=getattr(req, "group_instance_id", None),
            client_id=ctx.client_id or "",
            client_host=_client_host(ctx),
            require_known_member_id=ctx.api_version >= 4,
            supports_skip_assignment=ctx.api_version >= 9,
        )
        return ctx.respond(
            {
                "error_code": result.error,
                "generation_id": result.generation,
                "protocol_type": result.protocol_type if not result.error else None,
                "protocol_name": result.protocol_name if not result.error else None,
                "leader": result.leader,
                "skip_assignment": result.skip_assignment,
                "member_id": result.member_id,
                "members": [
                    {"member_id": mid, "group_instance_id": iid, "metadata": metadata}
                    for mid, iid, metadata in result.members
                ],
            }
        )

    async def sync_group(self, ctx: RequestContext, req: Any) -> Any:
        result = await self.c.sync_group(
            req.group_id,
            req.generation_id,
            req.member_id,
            group_instance_id=getattr(req, "group_instance_id", None),
            protocol_type=getattr(req, "protocol_type", None),
            protocol_name=getattr(req, "protocol_name", None),
            assignments={a.member_id: bytes(a.assignment) for a in req.assignments},
        )
        return ctx.respond(
            {
                "error_code": result.error,
                "protocol_type": result.protocol_type,
                "protocol_name": result.protocol_name,
                "assignment": result.assignment,
            }
        )

    async def heartbeat(self, ctx: RequestContext, req: Any) -> Any:
        error = self.c.heartbeat(
            req.group_id,
            req.generation_id,
            req.member_id,
            getattr(req, "group_instance_id", None),
        )
        return ctx.respond({"error_code": error})

    async def leave_group(self, ctx: RequestContext, req: Any) -> Any:
        if ctx.api_version < 3:
            identities: list[tuple[str, str | None]] = [(req.member_id, None)]
        else:
            identities = [(m.member_id, m.group_instance_id) for m in req.members]
        top, errors = self.c.leave_group(req.group_id, identities)
        if ctx.api_version < 3:
            return ctx.respond({"error_code": top or (errors[0] if errors else 0)})
        return ctx.respond(
            {
                "error_code": top,
                "members": [
                    {"member_id": mid, "group_instance_id": iid, "error_code": err}
                    for (mid, iid), err in zip(identities, errors, strict=True)
                ],
            }
        )

    async def offset_commit(self, ctx: RequestContext, req: Any) -> Any:
        entries = commit_entries(req.topics)
        errors = self.c.commit_offsets(
            req.group_id,
            req.generation_id_or_member_epoch,
            req.member_id,
            entries,
            group_instance_id=getattr(req, "group_instance_id", None),
            api_version=ctx.api_version,
        )
        return ctx.respond({"topics": partition_errors(req.topics, errors)})

    def _fetch_group(
        self, group_id: str, topics: Any, require_stable: bool
    ) -> tuple[int, list[dict[str, Any]]]:
        wanted = None if topics is None else {t.name: list(t.partition_indexes) for t in topics}
        error, fetched = self.c.fetch_offsets(group_id, wanted, require_stable=require_stable)
        if error and wanted is not None:
            # Versions without a group-level error code carry it on each partition.
            return error, [
                {
                    "name": name,
                    "partitions": [
                        {
                            "partition_index": p,
                            "committed_offset": -1,
                            "committed_leader_epoch": -1,
                            "metadata": "",
                            "error_code": error,
                        }
                        for p in parts
                    ],
                }
                for name, parts in wanted.items()
            ]
        return error, [
            {
                "name": name,
                "partitions": [
                    {
                        "partition_index": o.partition,
                        "committed_offset": o.offset,
                        "committed_leader_epoch": o.leader_epoch,
                        "metadata": o.metadata,
                        "error_code": o.error,
                    }
                    for o in offsets
                ],
            }
            for name, offsets in fetched.items()
        ]

    async def offset_fetch(self, ctx: RequestContext, req: Any) -> Any:
        require_stable = bool(getattr(req, "require_stable", False))
        if ctx.api_version >= 8:
            groups = []
            for g in req.groups:
                error, topics = self._fetch_group(g.group_id, g.topics, require_stable)
                groups.append({"group_id": g.group_id, "error_code": error, "topics": topics})
            return ctx.respond({"groups": groups})
        error, topics = self._fetch_group(req.group_id, req.topics, require_stable)
        return ctx.respond({"error_code": error, "topics": topics})

    async def list_groups(self, ctx: RequestContext, req: Any) -> Any:
        error, groups = self.c.list_groups(getattr(req, "states_filter", ()) or ())
        return ctx.respond(
            {
                "error_code": error,
                "groups": [
                    {"group_id": gid, "protocol_type": ptype, "group_state": state}
                    for gid, ptype, state in groups
                ],
            }
        )

    async def describe_groups(self, ctx: RequestContext, req: Any) -> Any:
        include_ops = bool(getattr(req, "include_authorized_operations", False))
        described = []
        for group_id in req.groups:
            s = self.c.describe_group(group_id)
            entry: dict[str, Any] = {
                "error_code": s.error,
                "group_id": s.group_id,
                "group_state": s.state,
                "protocol_type": s.protocol_type,
                "protocol_data": s.protocol_data,
                "members": [
                    {
                        "member_id": mid,
                        "group_instance_id": iid,
                        "client_id": client_id,
                        "client_host": host,
                        "member_metadata": metadata,
                        "member_assignment": assignment,
                    }
                    for mid, iid, client_id, host, metadata, assignment in s.members
                ],
            }
            if include_ops:
                entry["authorized_operations"] = _GROUP_OPERATIONS
            described.append(entry)
        return ctx.respond({"groups": described})

    async def delete_groups(self, ctx: RequestContext, req: Any) -> Any:
        return ctx.respond(
            {
                "results": [
                    {"group_id": gid, "error_code": self.c.delete_group(gid)}
                    for gid in req.groups_names
                ]
            }
        )

    def by_api_key(self) -> dict[int, Any]:
        return {
            8: self.offset_commit,
            9: self.offset_fetch,
            11: self.join_group,
            12: self.heartbeat,
            13: self.leave_group,
            14: self.sync_group,
            15: self.describe_groups,
            16: self.list_groups,
            42: self.delete_groups,
        }


def register_group_apis(coordinator: GroupCoordinator, registry: Any) -> GroupApis:
    apis = GroupApis(coordinator)
    for api_key, handler in apis.by_api_key().items():
        lo, hi = VERSIONS[api_key]
        registry.register(api_key, lo, hi, handler, owner=OWNER)
    return apis


__all__ = ["OWNER", "VERSIONS", "GroupApis", "register_group_apis"]
