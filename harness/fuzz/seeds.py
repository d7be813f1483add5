"""Valid request frames, one per API key and version a node serves, built from kio's
schemas with plausible values (a topic that exists, a partition it has, short timeouts).

Mutations of a frame that decodes reach deeper than random bytes: most of a mutated
seed is still well-formed, so the node's decoder accepts it and its handler runs on
odd values. Values are chosen from field names; anything not named gets a small
constant, and every array holds one element (so its element is there to mutate).
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass, field
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveTupleField,
    classify_field,
    get_schema_field_type,
)

from ...cluster.protocol.build import make
from ...cluster.protocol.codec import UnsupportedApi, encode_request, request_class
from ...cluster.protocol.records import encode_batch
from .layout import Slot, layout_of

CLIENT_ID = "fuzz"
ZERO_UUID = uuid.UUID(int=0)
FUZZ_TOPIC = "fuzz-topic"
FAKE_BROKER_ID = 4242
"""Broker id in seeds of the controller's own APIs (registration, heartbeats): one no
real node has, so seeds do not fence the cluster's brokers."""


@dataclass(frozen=True)
class Plausible:
    """Values the cluster under test knows (seeds that name them get past lookups)."""

    topic: str = FUZZ_TOPIC
    topic_id: uuid.UUID = ZERO_UUID
    group: str = "fuzz-group"
    transactional_id: str = "fuzz-txn"
    records: bytes = field(
        default_factory=lambda: encode_batch([(b"k", b"fuzz")], timestamp_ms=1_700_000_000_000)
    )


@dataclass(frozen=True)
class Seed:
    """One valid request frame (without its size prefix) and where its lengths are."""

    api_key: int
    api_version: int
    body: bytes
    slots: tuple[Slot, ...]


_STRINGS = {
    "group_id": "group",
    "groups": "group",
    "groups_names": "group",
    "coordinator_keys": "group",
    "transactional_id": "transactional_id",
    "transactional_ids": "transactional_id",
    "v3_and_below_transactional_id": "transactional_id",
    "topic": "topic",
    "name": "topic",
    "topic_names": "topic",
    "resource_name": "topic",
}
_CONSTANT_STRINGS = {
    "member_id": "",
    "protocol_type": "consumer",
    "protocol_name": "range",
    "host": "127.0.0.1",
    "cluster_id": None,
    "rack": None,
    "rack_id": "",
    "group_instance_id": None,
    "key": "cleanup.policy",
    "value": "delete",
    "configuration_keys": "cleanup.policy",
    "state_filters": "Ongoing",
    "states_filter": "Stable",
    "transactional_id_pattern": "fuzz.*",
    "client_software_name": "txnchaos-fuzz",
    "client_software_version": "1.0",
}
_INTS = {
    "acks": -1,
    "replica_id": -1,
    "max_wait": 10,
    "min_bytes": 1,
    "max_bytes": 1 << 20,
    "partition_max_bytes": 1 << 20,
    "session_id": 0,
    "session_epoch": -1,
    "timestamp": -1,
    "current_leader_epoch": -1,
    "last_fetched_epoch": -1,
    "committed_leader_epoch": -1,
    "log_start_offset": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "v3_and_below_producer_id": -1,
    "v3_and_below_producer_epoch": -1,
    "generation_id": -1,
    "generation_id_or_member_epoch": -1,
    "member_epoch": 0,
    "num_partitions": 1,
    "replication_factor": 1,
    "timeout": 500,
    "session_timeout": 10_000,
    "rebalance_timeout": 10_000,
    "transaction_timeout": 60_000,
    "retention_time": -1,
    "broker_id": FAKE_BROKER_ID,
    "broker_ids": FAKE_BROKER_ID,
    "broker_epoch": -1,
    "replica_epoch": -1,
    "coordinator_epoch": 0,
    "port": 9,
    "security_protocol": 0,
    "resource_type": 2,
    "max_supported_version": 1,
    "duration_filter": -1,
    "producer_id_filters": 1,
    "transaction_version": 0,
}


def _string(name: str, plausible: Plausible) -> Any:
    if name in _STRINGS:
        return getattr(plausible, _STRINGS[name])
    return _CONSTANT_STRINGS.get(name, "fuzz")


def _primitive(name: str, kafka_type: str, plausible: Plausible) -> Any:
    if kafka_type == "string":
        return _string(name, plausible)
    if kafka_type == "records":
        return plausible.records
    if kafka_type == "bytes":
        return b""
    if kafka_type == "bool":
        return name == "validate_only"  # CreateTopics seeds only validate
    if kafka_type == "uuid":
        return plausible.topic_id if name == "topic_id" else ZERO_UUID
    if kafka_type == "datetime_i64":
        return 0
    return _INTS.get(name, 0)


def plausible_values(cls: type, plausible: Plausible) -> dict[str, Any]:
    """A nested dict for ``build.make``: every field of ``cls`` with a plausible value."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.metadata.get("tag") is not None:
            continue  # left at its default, which kio does not encode: seeds send no tags
        kind = classify_field(f)
        if isinstance(kind, EntityTupleField):
            out[f.name] = [plausible_values(kind.type_, plausible)]
        elif isinstance(kind, EntityField):
            out[f.name] = plausible_values(kind.type_, plausible)
        else:
            value = _primitive(f.name, get_schema_field_type(f), plausible)
            out[f.name] = [value] if isinstance(kind, PrimitiveTupleField) else value
    return out


DELETE_TOPICS = 20
DOOMED_TOPIC = "fuzz-doomed"
"""What DeleteTopics seeds name: deleting the seeds' own topic would leave most other
seeds naming a topic that is gone."""


def build_seed(api_key: int, api_version: int, plausible: Plausible) -> Seed:
    cls = request_class(api_key, api_version)
    if api_key == DELETE_TOPICS:
        plausible = dataclasses.replace(plausible, topic=DOOMED_TOPIC, topic_id=ZERO_UUID)
    request = make(cls, plausible_values(cls, plausible))
    body = encode_request(0, request, CLIENT_ID)[4:]
    return Seed(api_key, api_version, body, layout_of(cls, body))


def build_corpus(ranges: dict[int, tuple[int, int]], plausible: Plausible) -> list[Seed]:
    """A seed for every version of every API in ``ranges`` (api key -> (min, max)), as a
    node's ApiVersions answer lists them, that kio has a schema for: a seed is built from
    the schema's fields (Produce v0-v2, served for Kafka's oldest clients by a decoder of the
    node's own, have none in kio and get no seed)."""
    return [
        build_seed(key, version, plausible)
        for key, (low, high) in sorted(ranges.items())
        for version in range(low, high + 1)
        if has_schema(key, version)
    ]


def has_schema(api_key: int, api_version: int) -> bool:
    try:
        request_class(api_key, api_version)
    except UnsupportedApi:
        return False
    return True


__all__ = ["CLIENT_ID", "FUZZ_TOPIC", "Plausible", "Seed", "build_corpus", "build_seed"]
