"""The typed strategy: every case is a frame that decodes as a request of its API and
version (typed cases reach the handlers, not the decoder), its fields carry hostile values
(other producers' ids, control characters, patterns, bad configs and batches), and a case
id with a seed names its bytes exactly."""

from __future__ import annotations

import struct
import uuid
from collections import Counter

import pytest

from txnchaos.cluster.protocol.codec import decode_request
from txnchaos.harness.fuzz.runner import FuzzOptions, case_for
from txnchaos.harness.fuzz.seeds import Plausible, Seed, build_corpus
from txnchaos.harness.fuzz.typed import FORGED_LINE, PATTERNS, TypedContext, make_typed_case

# A broker's and a coordinator's APIs (a subset of what the nodes answer in ApiVersions)
BROKER = {0: (3, 11), 1: (4, 16), 2: (1, 7), 3: (0, 12), 10: (0, 6), 18: (0, 3), 22: (0, 4)}
COORDINATOR = {
    19: (2, 7),
    22: (0, 4),
    20: (1, 6),
    24: (0, 3),
    44: (0, 1),
    61: (0, 0),
    65: (0, 0),
    66: (0, 2),
}
OTHER = (4242, 7)
CONTEXT = TypedContext(
    Plausible(topic_id=uuid.UUID("12345678-9abc-4def-8123-456789abcdef")), (OTHER,)
)
CASES = 1_000


@pytest.fixture(scope="module")
def corpora() -> list[list[Seed]]:
    return [build_corpus(BROKER, CONTEXT.plausible), build_corpus(COORDINATOR, CONTEXT.plausible)]


def test_typed_cases_are_valid_frames_with_hostile_values(corpora: list[list[Seed]]) -> None:
    fields: Counter[str] = Counter()
    data = []
    fallbacks = 0
    for case_id in range(CASES):
        case = make_typed_case(corpora, CONTEXT, 3, case_id)
        assert case.single and case.mutators
        assert int.from_bytes(case.data[:4], "big") == len(case.data) - 4
        header, _ = decode_request(case.data[4:])  # decodes: no byte is broken
        assert (header.request_api_key, header.request_api_version) == (
            case.api_key,
            case.api_version,
        )
        assert header.correlation_id == case_id
        if case.mutators == ("typed:none",):
            fallbacks += 1
        fields.update(m.removeprefix("typed:").rsplit(".", 1)[-1] for m in case.mutators)
        data.append(case.data)
    assert fallbacks < CASES // 20  # values kio cannot encode are drawn again
    # the fields that matter get hostile values
    for name in ("producer_id", "producer_epoch", "transactional_id", "records", "topics"):
        assert fields[name] > 0, name
    joined = b"".join(data)
    assert struct.pack(">qh", *OTHER) in joined  # another producer's id and epoch, as issued
    assert FORGED_LINE.encode() in joined
    assert any(p.encode() in joined for p in PATTERNS if len(p) > 2)  # regular expressions


def test_delete_topics_cases_never_name_the_fuzz_topic(corpora: list[list[Seed]]) -> None:
    """Its seeds delete a topic of their own; a typed DeleteTopics named the fuzz topic by
    its id and deleted it under every other case."""
    deletes = [make_typed_case(corpora, CONTEXT, 9, i) for i in range(3_000)]
    deletes = [c for c in deletes if c.api_key == 20]
    assert deletes
    assert not [c for c in deletes if CONTEXT.plausible.topic_id.bytes in c.data]
    assert not [c for c in deletes if b"fuzz-topic" in c.data]


def test_a_typed_case_is_named_by_seed_and_id(corpora: list[list[Seed]]) -> None:
    first = make_typed_case(corpora, CONTEXT, 5, 77)
    assert make_typed_case(corpora, CONTEXT, 5, 77) == first
    assert make_typed_case(corpora, CONTEXT, 6, 77).data != first.data


def test_mixed_alternates_the_strategies(corpora: list[list[Seed]]) -> None:
    mixed = FuzzOptions(seed=2, strategy="mixed")
    even = case_for(corpora, mixed, 10, CONTEXT)
    odd = case_for(corpora, mixed, 11, CONTEXT)
    assert not any(m.startswith("typed:") for m in even.mutators)
    assert all(m.startswith("typed:") for m in odd.mutators)
