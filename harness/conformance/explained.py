"""Differences between Apache Kafka and our cluster that are written down, with the reason.

A key is a probe's full name (``kip890.x[tv2]``) or its base name (every configuration).
A probe whose outcomes differ passes only when it is here; a probe listed here whose
outcomes are equal is reported so its entry can go (a difference that was being fixed,
and is).

Kinds:

* ``being-fixed``: a difference the outside audit of issue 34 listed, fixed on its own
  branch; the entry goes once that branch is merged (the suite then reports it equal
  and says the entry can go).
* ``bug-switch``: our cluster runs a deliberate ``txnchaos.bug.*`` switch in this probe.
* ``kafka-bug``: Apache Kafka's answer is a documented bug of Kafka's (the reason names it).
* ``kafka-lacks``: the Kafka release does not implement what the probe asks for yet (a
  KIP's part still to come); ours implements the KIP.
* ``open``: a difference of ours this suite found and that is not fixed yet; the reason
  says what fixing it takes (docs/conformance.md lists them).
"""

from __future__ import annotations

from dataclasses import dataclass

KINDS = ("being-fixed", "bug-switch", "kafka-bug", "kafka-lacks", "open")


@dataclass(frozen=True)
class Explanation:
    kind: str
    reason: str

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"explanation kind {self.kind!r} is not one of {KINDS}")

    def label(self) -> str:
        return f"{self.kind}: {self.reason}"


def being_fixed(which: str) -> Explanation:
    return Explanation("being-fixed", which)


def _open(reason: str) -> Explanation:
    return Explanation("open", reason)


# Kafka's bugs the suite found (docs/findings/ has each, with its reproduction).
TV0_PENDING = Explanation(
    "kafka-bug",
    "Kafka 4.4 refuses a Produce v12 at transaction.version 0 (UNSUPPORTED_VERSION, as ours) "
    "but leaves the transactional id's pending state set: every later EndTxn, "
    "AddPartitionsToTxn and InitProducerId of the id, a new instance's included, is "
    "CONCURRENT_TRANSACTIONS until the coordinator reloads "
    "(docs/findings/kafka-tv0-produce-v12-strands-the-id.md); ours leaves the id usable",
)
# The differences issue 34's outside audit listed (fixed on another branch).
# Differences this suite found that are not fixed yet: what fixing each takes.
ADMIN_ABORT = _open(
    "a WriteTxnMarkers with coordinator epoch -1 (KIP-664's admin form): Kafka 4.4 takes it "
    "as any coordinator's marker, so once the producer has a marker of coordinator epoch 0 "
    "it is TRANSACTION_COORDINATOR_FENCED (stale epoch and nothing open alike); ours applies "
    "KIP-664's admin rules to -1 (an open transaction, the exact epoch, no coordinator "
    "fencing) and answers INVALID_TXN_STATE. Following Kafka means dropping those rules "
    "(ProducerStateManager.validate_admin_marker, tests/cluster/broker/"
    "test_admin_abort_markers.py); Kafka's own abort tool sends the coordinator epoch "
    "DescribeProducers shows, which passes on both"
)
NOT_SERVED = _open(
    "TxnOffsetCommit v6 (TRANSACTION_ABORTABLE, KIP-890) is not served: kio 0.6.5, which "
    "decodes our requests, has no v6 schema (its TxnOffsetCommit stops at v5); serving it "
    "takes a kio with the schema (or our own codec for it)"
)
INIT_V6 = _open(
    "our cluster offers InitProducerId v6 (KIP-939) always; Kafka 4.4 marks v6 unstable "
    "and offers it only with unstable.api.versions.enable=true (the tv2-v6 configuration "
    "shows both equal then). Gating v6 behind that setting needs our own 2PC users "
    "(harness/clients, scenarios) to set it"
)
ELR_MIN_ISR = _open(
    "Kafka from 4.1 enables eligible leader replicas (KIP-966) on a new cluster, and its "
    "controller then writes a cluster-wide dynamic min.insync.replicas (the controller's "
    "static value, 1): the topic's and the broker's min.insync.replicas come from "
    'DYNAMIC_DEFAULT_BROKER_CONFIG (3), and the broker resource named "" (the cluster\'s '
    "dynamic defaults) lists it. Our cluster has neither eligible leader replicas (no "
    "eligible.leader.replicas.version feature) nor dynamic configs (no AlterConfigs): "
    "following Kafka takes both, so ours answers as a Kafka cluster without them (source "
    "DEFAULT_CONFIG, no cluster-wide defaults)"
)
OTHER_RESOURCES = _open(
    "Kafka 4.4 describes GROUP (KIP-848's group configs), BROKER_LOGGER (log4j levels) and "
    "CLIENT_METRICS (KIP-714 subscriptions) configs; our cluster has none of these configs "
    "and answers INVALID_REQUEST for these resource types (topic and broker configs are "
    "served). Serving them takes the group configs in the group coordinator, a logger "
    "view of the node's logging, and KIP-714's subscriptions"
)
KEEP_PREPARED = Explanation(
    "kafka-lacks",
    "Kafka 4.4.0 does not implement KIP-939's KeepPreparedTxn yet: InitProducerId v6 with "
    "KeepPreparedTxn=true is answered UNSUPPORTED_VERSION (no release up to 4.4.0 keeps a "
    "prepared transaction); ours implements it as KIP-939 specifies",
)

EXPLAINED: dict[str, Explanation] = {
    **dict.fromkeys(
        (
            "kip890.new-client-implicit-add[tv0]",
            "kip890.new-client-implicit-add[tv0-noverify]",
            "kip890.tv2-produce-at-tv0-strands-the-id[tv0]",
        ),
        TV0_PENDING,
    ),
    "kip664.admin-abort-stale-epoch[tv2]": ADMIN_ABORT,
    "apiversions.TxnOffsetCommit": NOT_SERVED,
    "apiversions.InitProducerId[tv2]": INIT_V6,
    "apiversions.InitProducerId[tv0]": INIT_V6,
    "describeconfigs.min-insync-replicas": ELR_MIN_ISR,
    "describeconfigs.other-resource-types": OTHER_RESOURCES,
    **dict.fromkeys(
        (
            "kip939.keep-prepared-nothing-open",
            "kip939.keep-prepared-then-commit",
            "kip939.keep-prepared-then-abort",
            "kip939.keep-prepared-without-2pc",
            "kip939.prepared-survives-restart",
        ),
        KEEP_PREPARED,
    ),
}


def explanation(probe: str, base: str) -> Explanation | None:
    return EXPLAINED.get(probe) or EXPLAINED.get(base)


def markdown() -> str:
    """The explained differences as docs/conformance.md shows them."""
    groups: dict[Explanation, list[str]] = {}
    for probe, why in EXPLAINED.items():
        groups.setdefault(why, []).append(probe)
    rows = ["| kind | probes | reason |", "|---|---|---|"]
    for why, probes in groups.items():
        names = "<br>".join(f"`{p}`" for p in sorted(probes))
        rows.append(f"| {why.kind} | {names} | {why.reason} |")
    return "\n".join(rows)
