"""DescribeConfigs v1-v4 (topic and broker resources): each config's value, source,
synonyms, type, read-only and sensitive flags, whether documentation came, and the errors
of unknown or invalid topics, broker ids and resource types.

The probes ask for the configs the project's nodes have (Kafka has some 37 topic and 350
broker configs; the nodes have 12 and their own settings): a config Kafka has and the
nodes do not is left out of the comparison, never shown as equal. Broker settings whose
default the project chose differently from Kafka's are compared apart, without their
values (``describeconfigs.broker-project-defaults``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..catalogue import Outcome, probe
from ..context import ProbeContext

DESCRIBE_CONFIGS = 32
TOPIC, BROKER, GROUP, BROKER_LOGGER, CLIENT_METRICS = 2, 4, 32, 8, 16
BROKER_ID = "1"  # the probes' cluster has one broker, node 1 on both sides

#: the topic configs the project's nodes implement (cluster/controller/topic_config.py),
#: min.insync.replicas apart (describeconfigs.min-insync-replicas)
TOPIC_CONFIGS = (
    "cleanup.policy",
    "compression.type",
    "index.interval.bytes",
    "max.message.bytes",
    "message.timestamp.after.max.ms",
    "message.timestamp.before.max.ms",
    "message.timestamp.type",
    "retention.bytes",
    "retention.ms",
    "segment.bytes",
    "segment.ms",
)
#: the nodes' settings that are Kafka broker configs with Kafka's default
BROKER_CONFIGS = (
    "authorizer.class.name",
    "auto.create.topics.enable",
    "broker.session.timeout.ms",
    "connection.failed.authentication.delay.ms",
    "connections.max.idle.ms",
    "default.replication.factor",
    "fetch.max.bytes",
    "group.max.session.timeout.ms",
    "log.index.interval.bytes",
    "log.message.timestamp.after.max.ms",
    "log.message.timestamp.before.max.ms",
    "log.retention.bytes",
    "log.retention.check.interval.ms",
    "log.retention.ms",
    "log.roll.ms",
    "log.segment.bytes",
    "max.connections.per.ip",
    "message.max.bytes",
    "num.partitions",
    "offsets.topic.num.partitions",
    "producer.id.expiration.ms",
    "queued.max.requests",
    "replica.fetch.response.max.bytes",
    "sasl.jaas.config",
    "socket.request.max.bytes",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms",
    "transaction.max.timeout.ms",
    "transaction.partition.verification.enable",
    "transaction.remove.expired.transaction.cleanup.interval.ms",
    "transaction.state.log.num.partitions",
    "transaction.two.phase.commit.enable",
    "transactional.id.expiration.ms",
)
#: the nodes' settings that are Kafka broker configs with a default of the project's own
#: (shorter timeouts and limits for a test cluster, SASL/PLAIN): compared without values
PROJECT_DEFAULTS = (
    "broker.heartbeat.interval.ms",
    "group.initial.rebalance.delay.ms",
    "group.min.session.timeout.ms",
    "max.connections",
    "queued.max.request.bytes",
    "sasl.enabled.mechanisms",
    "sasl.mechanism.inter.broker.protocol",
)


def _describe(
    ctx: ProbeContext,
    resources: Sequence[tuple[int, str, Sequence[str] | None]],
    *,
    version: int = 4,
    synonyms: bool = True,
    documentation: bool = False,
) -> Any:
    return ctx.send(
        DESCRIBE_CONFIGS,
        version,
        resources=[
            {
                "resource_type": t,
                "resource_name": n,
                "configuration_keys": None if k is None else list(k),
            }
            for t, n, k in resources
        ],
        include_synonyms=synonyms,
        include_documentation=documentation,
    )


def _entry(c: Any, values: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {
        "read_only": bool(c.read_only),
        "sensitive": bool(c.is_sensitive),
    }
    if values:
        out["value"] = c.value
        out["source"] = int(c.config_source)
        out["synonyms"] = [[s.name, s.value, int(s.source)] for s in c.synonyms]
    if hasattr(c, "config_type"):  # v3+
        out["type"] = int(c.config_type)
        out["documentation"] = "none" if c.documentation is None else "set"
    return out


def _result(ctx: ProbeContext, r: Any, values: bool = True) -> dict[str, Any]:
    return {
        "error": ctx.err(r.error_code),
        "message": r.error_message,
        "resource": [int(r.resource_type), r.resource_name.removeprefix(ctx.probe + "-")],
        "configs": {c.name: _entry(c, values) for c in sorted(r.configs, key=lambda c: c.name)},
    }


def _topic_probe(ctx: ProbeContext, configs: dict[str, str]) -> Outcome:
    topic = ctx.topic(configs=configs)
    out: Outcome = {}
    for version in (1, 4):
        for synonyms, documentation in ((True, True), (False, False)):
            r = _describe(
                ctx,
                [(TOPIC, topic, TOPIC_CONFIGS)],
                version=version,
                synonyms=synonyms,
                documentation=documentation,
            )
            key = f"v{version}" + (" synonyms documentation" if synonyms else "")
            out[key] = _result(ctx, r.results[0])
    return out


@probe("describeconfigs.topic-override", tags=("DescribeConfigs",), configs=("tv2",))
def topic_override(ctx: ProbeContext) -> Outcome:
    """A topic's configs, two of them overridden at creation: values, sources (the override,
    else the default), synonyms, Kafka's types, never read-only, documentation when asked;
    v1 and v4, with and without synonyms."""
    return _topic_probe(ctx, {"retention.bytes": "1000000", "segment.ms": "600000"})


@probe("describeconfigs.topic-static", tags=("DescribeConfigs",), configs=("tv2-static",))
def topic_static(ctx: ProbeContext) -> Outcome:
    """A topic's configs on a broker with static settings (log.segment.bytes,
    log.retention.ms, message.max.bytes at its default's value): STATIC_BROKER_CONFIG
    sources, the static setting before the default among the synonyms; an override still
    comes first."""
    return _topic_probe(ctx, {"segment.bytes": "2097152"})


@probe("describeconfigs.topic-keys", tags=("DescribeConfigs",))
def topic_keys(ctx: ProbeContext) -> Outcome:
    """configuration_keys: null and an empty list ask for every config, a list for those
    named (a name the topic does not have is left out, no error)."""
    topic = ctx.topic()

    def names(keys: Sequence[str] | None) -> Any:
        r = _describe(ctx, [(TOPIC, topic, keys)]).results[0]
        got = {c.name for c in r.configs}
        return {
            "error": ctx.err(r.error_code),
            "has_the_nodes_configs": set(TOPIC_CONFIGS) <= got,
            "named": sorted(got & {"retention.ms", "no.such.config", "log.retention.ms"}),
        }

    return {
        "null": names(None),
        "empty": names([]),
        "some": names(["retention.ms", "no.such.config", "log.retention.ms"]),
        "unknown only": names(["no.such.config"]),
    }


@probe("describeconfigs.topic-errors", tags=("DescribeConfigs",))
def topic_errors(ctx: ProbeContext) -> Outcome:
    """A topic that does not exist, and names Kafka's topic rules refuse (empty, '.', '..',
    a character outside [a-zA-Z0-9._-], 250 characters): the error and message of each, at
    v1 and v4, in one request with a topic that exists."""
    topic = ctx.topic()
    names = [topic, f"{ctx.probe}-missing", "", ".", "..", "bad name!", "x" * 250]
    out: Outcome = {}
    for version in (1, 4):
        r = _describe(ctx, [(TOPIC, n, ["retention.ms"]) for n in names], version=version)
        out[f"v{version}"] = [
            {k: v for k, v in _result(ctx, x).items() if k != "configs"}
            | {"configs": len(x.configs)}
            for x in r.results
        ]
    return out


@probe("describeconfigs.broker", tags=("DescribeConfigs",), configs=("tv2", "tv2-static"))
def broker(ctx: ProbeContext) -> Outcome:
    """The broker's own configs (its id as the name): values, sources (a setting the node
    was given is a static broker config), synonyms, Kafka's types, read-only unless Kafka
    can alter the config while it runs, a password hidden; v1 and v4."""
    out: Outcome = {}
    for version in (1, 4):
        r = _describe(
            ctx, [(BROKER, BROKER_ID, BROKER_CONFIGS)], version=version, documentation=True
        )
        out[f"v{version}"] = _result(ctx, r.results[0])
    r = _describe(ctx, [(BROKER, BROKER_ID, BROKER_CONFIGS)], synonyms=False)
    out["v4 no synonyms"] = _result(ctx, r.results[0])
    return out


@probe("describeconfigs.broker-project-defaults", tags=("DescribeConfigs",))
def broker_project_defaults(ctx: ProbeContext) -> Outcome:
    """Broker configs whose default the project chose for a test cluster (short
    heartbeats and session timeouts, SASL/PLAIN): their types, read-only and sensitive
    flags (their values differ by design)."""
    r = _describe(ctx, [(BROKER, BROKER_ID, PROJECT_DEFAULTS)], documentation=True)
    return _result(ctx, r.results[0], values=False)


@probe("describeconfigs.broker-errors", tags=("DescribeConfigs",))
def broker_errors(ctx: ProbeContext) -> Outcome:
    """Broker ids that are not the node's, or not integers (Java's parseInt: a sign and
    leading zeros are read, a space is not), at v1 and v4."""
    names = ["2", "abc", " 1", "99999999999", "01", "+1"]
    out: Outcome = {}
    for version in (1, 4):
        r = _describe(
            ctx, [(BROKER, n, ["num.partitions"]) for n in names], version=version, synonyms=False
        )
        out[f"v{version}"] = [
            {k: v for k, v in _result(ctx, x).items() if k != "configs"}
            | {"configs": sorted(c.name for c in x.configs)}
            for x in r.results
        ]
    return out


@probe("describeconfigs.unknown-resource-type", tags=("DescribeConfigs",))
def unknown_resource_type(ctx: ProbeContext) -> Outcome:
    """A resource type Kafka does not know (0, 3, 99) in a request refuses the whole request:
    every resource, a valid topic's included, is INVALID_REQUEST."""
    topic = ctx.topic()
    out: Outcome = {}
    for kind in (0, 3, 99):
        r = _describe(ctx, [(TOPIC, topic, ["retention.ms"]), (kind, "x", None)])
        out[str(kind)] = [_result(ctx, x) for x in r.results]
    return out


@probe("describeconfigs.other-resource-types", tags=("DescribeConfigs",))
def other_resource_types(ctx: ProbeContext) -> Outcome:
    """GROUP, BROKER_LOGGER and CLIENT_METRICS configs (resource types Kafka serves): the
    error and the configs named."""
    out: Outcome = {}
    for kind, name, keys in (
        (GROUP, f"{ctx.probe}-g", ["consumer.session.timeout.ms"]),
        (BROKER_LOGGER, BROKER_ID, ["root"]),
        (CLIENT_METRICS, f"{ctx.probe}-m", ["interval.ms"]),
    ):
        r = _describe(ctx, [(kind, name, keys)]).results[0]
        out[str(kind)] = {
            "error": ctx.err(r.error_code),
            "configs": sorted(c.name for c in r.configs),
        }
    return out


@probe("describeconfigs.min-insync-replicas", tags=("DescribeConfigs",))
def min_insync_replicas(ctx: ProbeContext) -> Outcome:
    """min.insync.replicas of a topic and of the broker, and the cluster-wide dynamic
    defaults (the broker resource named ""): Kafka from 4.1, with eligible leader replicas
    (KIP-966), keeps a cluster-wide min.insync.replicas."""
    topic = ctx.topic()
    r = _describe(
        ctx,
        [
            (TOPIC, topic, ["min.insync.replicas"]),
            (BROKER, BROKER_ID, ["min.insync.replicas"]),
            (BROKER, "", None),
        ],
    )
    return {"results": [_result(ctx, x) for x in r.results]}
