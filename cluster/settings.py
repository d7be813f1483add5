"""Node configuration: Kafka's broker config names, our defaults, and parsing of
``--set KEY=VALUE``. An unknown key or a badly typed value is a clear error at
start-up, never a silently ignored setting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .bugs import BUG_SWITCHES
from .security.config import SecurityConfig
from .security.sasl import SaslConfigError


@dataclass(frozen=True, slots=True)
class SettingSpec:
    name: str
    kind: type
    default: Any
    doc: str
    minimum: int | None = None
    maximum: int | None = None


_SPECS: tuple[SettingSpec, ...] = (
    SettingSpec("num.partitions", int, 1, "partitions of auto-created topics"),
    SettingSpec("default.replication.factor", int, 1, "replicas of auto-created topics"),
    SettingSpec("auto.create.topics.enable", bool, True, "create topics on first metadata use"),
    SettingSpec("log.segment.bytes", int, 1 << 30, "segment size", 14, 2**31 - 1),
    SettingSpec("log.roll.ms", int, 7 * 24 * 3600 * 1000, "roll a segment after this age", 1),
    SettingSpec("log.retention.ms", int, 7 * 24 * 3600 * 1000, "delete segments older (-1: never)"),
    SettingSpec("log.retention.bytes", int, -1, "partition size limit (-1: none)"),
    SettingSpec("log.retention.check.interval.ms", int, 300_000, "how often retention runs"),
    SettingSpec(
        "log.index.interval.bytes",
        int,
        4096,
        "bytes of batches between two offset-index entries (an entry after the first batch "
        "past it)",
        0,
    ),
    SettingSpec("message.max.bytes", int, 1_048_588, "largest record batch accepted"),
    SettingSpec(
        "log.message.timestamp.before.max.ms",
        int,
        2**63 - 1,
        "how far behind the broker's clock a record's timestamp may be",
        0,
    ),
    SettingSpec(
        "log.message.timestamp.after.max.ms",
        int,
        3_600_000,
        "how far ahead of the broker's clock a record's timestamp may be",
        0,
    ),
    SettingSpec("min.insync.replicas", int, 1, "accepted for compatibility; one replica"),
    SettingSpec(
        "fetch.max.bytes",
        int,
        57_671_680,
        "most record bytes one Fetch response carries (a larger max_bytes is cut to it)",
        1024,
    ),
    SettingSpec(
        "replica.fetch.response.max.bytes",
        int,
        10_485_760,
        "most record bytes one Fetch response to a replica (replica_id >= 0) carries",
        0,
    ),
    SettingSpec("socket.request.max.bytes", int, 104_857_600, "largest request frame", 1),
    SettingSpec("max.connections", int, 1000, "connections a node accepts at once", 1),
    SettingSpec("max.connections.per.ip", int, 2_147_483_647, "connections from one address", 1),
    SettingSpec("queued.max.requests", int, 500, "requests received and not yet started", 1),
    SettingSpec(
        "queued.max.request.bytes",
        int,
        268_435_456,
        "memory reserved for requests larger than a connection's buffer "
        "(at least socket.request.max.bytes + 4)",
        1,
    ),
    SettingSpec("connections.max.idle.ms", int, 600_000, "close connections silent this long", 1),
    SettingSpec(
        "connection.failed.authentication.delay.ms",
        int,
        100,
        "answer a failed SASL authentication this much later (slows password guessing)",
        0,
    ),
    SettingSpec("producer.id.expiration.ms", int, 86_400_000, "idle producer state expiry"),
    SettingSpec("group.initial.rebalance.delay.ms", int, 100, "delay before the first rebalance"),
    SettingSpec("group.min.session.timeout.ms", int, 100, "smallest session timeout"),
    SettingSpec("group.max.session.timeout.ms", int, 1_800_000, "largest session timeout"),
    SettingSpec("offsets.topic.num.partitions", int, 50, "internal group partitions"),
    SettingSpec("transaction.state.log.num.partitions", int, 50, "internal transaction partitions"),
    SettingSpec("broker.session.timeout.ms", int, 9_000, "controller fences a silent broker"),
    SettingSpec("broker.heartbeat.interval.ms", int, 500, "broker heartbeat period"),
    SettingSpec("metadata.refresh.interval.ms", int, 500, "broker metadata pull period"),
    SettingSpec("transaction.max.timeout.ms", int, 900_000, "largest transaction timeout"),
    SettingSpec("transactional.id.expiration.ms", int, 604_800_000, "idle transactional id expiry"),
    SettingSpec(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        int,
        10_000,
        "how often timed-out transactions are aborted",
    ),
    SettingSpec(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        int,
        3_600_000,
        "how often expired transactional ids are removed",
    ),
    SettingSpec(
        "transaction.partition.verification.enable", bool, True, "KIP-890 part 1 verification"
    ),
    SettingSpec("transaction.two.phase.commit.enable", bool, False, "KIP-939 2PC"),
    SettingSpec(
        "transaction.version",
        int,
        2,
        "finalized transaction.version a new cluster starts with (0-2; KIP-890); "
        "later changed with UpdateFeatures",
        0,
    ),
    SettingSpec(
        "txnchaos.cluster.action.authorization.enable",
        bool,
        True,
        "answer server-only APIs (AddPartitionsToTxn v4+, the controller's node APIs) with "
        "CLUSTER_AUTHORIZATION_FAILED unless the client id names a node (txnchaos-node-*); "
        "with authorizer.class.name set, ACLs decide instead",
    ),
    SettingSpec(
        "listener.security.protocol",
        str,
        "PLAINTEXT",
        "security protocol of the node's listener (clients and peers): PLAINTEXT or "
        "SASL_PLAINTEXT (Kafka: the listener's entry in listener.security.protocol.map)",
    ),
    SettingSpec(
        "sasl.enabled.mechanisms",
        str,
        "PLAIN",
        "comma-separated SASL mechanisms offered: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512",
    ),
    SettingSpec(
        "sasl.mechanism.inter.broker.protocol",
        str,
        "PLAIN",
        "the mechanism nodes use towards each other (one of sasl.enabled.mechanisms)",
    ),
    SettingSpec(
        "sasl.jaas.config",
        str,
        "",
        'JAAS line: \'<LoginModule> required username="node" password="pw" user_node="pw" '
        "user_alice=\"secret\";' (username/password: the nodes' own credentials; "
        "user_<name>: the accepted users, for every mechanism)",
    ),
    SettingSpec(
        "txnchaos.sasl.jaas.config.file",
        str,
        "",
        "a file holding the sasl.jaas.config line (or a JAAS file's KafkaServer { ... }; "
        "section) instead of the setting",
    ),
    SettingSpec(
        "authorizer.class.name",
        str,
        "",
        "non-empty (e.g. org.apache.kafka.metadata.authorizer.StandardAuthorizer) turns on "
        "ACL authorization; needs SASL_PLAINTEXT",
    ),
    SettingSpec(
        "super.users",
        str,
        "",
        "principals allowed everything, separated by ';' (e.g. User:admin); the nodes' "
        "own user always is one",
    ),
    SettingSpec(
        "allow.everyone.if.no.acl.found",
        bool,
        False,
        "allow an operation on a resource that has no ACL at all",
    ),
    SettingSpec(
        "txnchaos.late.transaction.buffer.ms",
        int,
        300_000,
        "PartitionsWithLateTransactionsCount counts a partition whose open transaction "
        "has run longer than transaction.max.timeout.ms plus this (KIP-664: 5 minutes)",
        0,
    ),
    SettingSpec(
        "txnchaos.transaction.concurrent.wait.ms",
        int,
        100,
        "hold requests for a completing transaction this long (0: Kafka's immediate "
        "CONCURRENT_TRANSACTIONS)",
    ),
    *(SettingSpec(b.setting, bool, False, f"BUG ({b.report}): {b.symptom}") for b in BUG_SWITCHES),
)

SPECS: dict[str, SettingSpec] = {s.name: s for s in _SPECS}


class SettingsError(ValueError):
    pass


def _parse(spec: SettingSpec, raw: str) -> Any:
    if spec.kind is bool:
        lowered = raw.strip().lower()
        if lowered in ("true", "1", "yes"):
            return True
        if lowered in ("false", "0", "no"):
            return False
        raise SettingsError(f"{spec.name}: expected true or false, got {raw!r}")
    if spec.kind is int:
        try:
            return int(raw)
        except ValueError:
            raise SettingsError(f"{spec.name}: expected an integer, got {raw!r}") from None
    return raw


class NodeSettings:
    """Effective broker settings: defaults overlaid with ``--set`` values."""

    def __init__(self, overrides: dict[str, Any] | None = None) -> None:
        self._values = {name: spec.default for name, spec in SPECS.items()}
        self._given = frozenset(overrides or {})
        for name, value in (overrides or {}).items():
            spec = SPECS.get(name)
            if spec is None:
                raise SettingsError(
                    f"unknown setting {name!r}; known settings: {', '.join(sorted(SPECS))}"
                )
            parsed = _parse(spec, value) if isinstance(value, str) else value
            if spec.minimum is not None and parsed < spec.minimum:
                raise SettingsError(f"{name}: must be at least {spec.minimum}, got {parsed}")
            if spec.maximum is not None and parsed > spec.maximum:
                raise SettingsError(f"{name}: must be at most {spec.maximum}, got {parsed}")
            self._values[name] = parsed
        if self._values["transaction.version"] > 2:
            raise SettingsError(
                f"transaction.version: must be 0, 1 or 2, got {self._values['transaction.version']}"
            )
        try:
            self.security = SecurityConfig.from_settings(self._values.__getitem__)
        except SaslConfigError as exc:
            raise SettingsError(str(exc)) from None
        frame = self._values["socket.request.max.bytes"]
        if self._values["queued.max.request.bytes"] < frame + 4:
            raise SettingsError(
                f"queued.max.request.bytes ({self._values['queued.max.request.bytes']}) must "
                f"hold one request of socket.request.max.bytes ({frame}) and its 4-byte prefix"
            )

    @classmethod
    def from_pairs(cls, pairs: list[str] | tuple[str, ...]) -> NodeSettings:
        overrides: dict[str, str] = {}
        for pair in pairs:
            key, sep, value = pair.partition("=")
            if not sep or not key:
                raise SettingsError(f"--set expects KEY=VALUE, got {pair!r}")
            overrides[key.strip()] = value.strip()
        return cls(overrides)

    def get(self, name: str) -> Any:
        return self._values[name]

    def given(self, name: str) -> bool:
        """Whether ``name`` was set (``--set``, a scenario's settings) rather than left at
        its default, even when set to the default's value: Kafka's static broker config
        as opposed to its default (DescribeConfigs' config source)."""
        return name in self._given

    def items(self) -> list[tuple[str, Any]]:
        return sorted(self._values.items())

    def overrides_as_pairs(self) -> list[str]:
        return [
            f"{name}={render_setting(value)}"
            for name, value in self.items()
            if value != SPECS[name].default
        ]


def render_setting(value: Any) -> str:
    """A setting's value as ``--set KEY=VALUE`` takes it (booleans as true/false)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
