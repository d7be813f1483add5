"""The fuzzer's seeds and mutators: every seed is a valid frame, and a case id with a seed
names a case's bytes exactly (a finding from a long run is reproduced by two numbers)."""

from __future__ import annotations

import contextlib
import random
import struct
import uuid
from pathlib import Path

import pytest

from txnchaos.cluster.protocol.codec import ProtocolError, decode_request, request_class
from txnchaos.cluster.protocol.frame_guard import MalformedFrame, request_guard
from txnchaos.harness.fuzz import mutators
from txnchaos.harness.fuzz.findings import Finding, FindingFileError, load, save
from txnchaos.harness.fuzz.mutators import BODY_MUTATORS, Case, make_case
from txnchaos.harness.fuzz.seeds import Plausible, Seed, build_corpus, build_seed

# What a broker and a coordinator of this project answer in ApiVersions (a subset is enough)
BROKER = {0: (3, 11), 1: (4, 16), 2: (1, 7), 3: (0, 12), 10: (0, 6), 18: (0, 3), 22: (0, 4)}
COORDINATOR = {3: (0, 12), 8: (2, 9), 11: (0, 9), 19: (2, 7), 20: (1, 6), 24: (0, 3), 62: (0, 0)}
PLAUSIBLE = Plausible(topic_id=uuid.UUID(int=7))


@pytest.fixture(scope="module")
def corpora() -> list[list[Seed]]:
    return [build_corpus(BROKER, PLAUSIBLE), build_corpus(COORDINATOR, PLAUSIBLE)]


def test_a_seed_for_every_version_of_every_api(corpora: list[list[Seed]]) -> None:
    broker, coordinator = corpora
    assert {(s.api_key, s.api_version) for s in broker} == {
        (k, v) for k, (lo, hi) in BROKER.items() for v in range(lo, hi + 1)
    }
    assert len(coordinator) == sum(hi - lo + 1 for lo, hi in COORDINATOR.values())


def test_every_seed_decodes_and_names_the_topic(corpora: list[list[Seed]]) -> None:
    for seed in corpora[0] + corpora[1]:
        header, body = decode_request(seed.body)
        assert header.request_api_key == seed.api_key
        assert header.client_id == "fuzz"
        if seed.api_key == 3 and seed.api_version >= 1:
            assert body.topics[0].name == "fuzz-topic"


def test_layout_finds_the_client_id_length_first() -> None:
    seed = build_seed(3, 12, PLAUSIBLE)
    first = seed.slots[0]
    assert (first.offset, first.kind, first.width) == (8, "len16", 2)
    assert struct.unpack_from(">h", seed.body, 8)[0] == len("fuzz")
    assert any(s.kind == "uvarint" for s in seed.slots)  # v12 is flexible


def test_same_seed_and_case_id_give_the_same_bytes(corpora: list[list[Seed]]) -> None:
    first = [make_case(corpora, 42, i) for i in range(500)]
    again = [make_case(corpora, 42, i) for i in reversed(range(500))][::-1]
    assert first == again
    other_seed = [make_case(corpora, 43, i) for i in range(500)]
    assert sum(a.data != b.data for a, b in zip(first, other_seed, strict=True)) > 400
    assert len({c.data for c in first}) > 450


def test_each_mutator_is_a_function_of_its_generator(corpora: list[list[Seed]]) -> None:
    seed = build_seed(1, 16, PLAUSIBLE)
    for name, mutate in BODY_MUTATORS.items():
        for n in range(20):
            a = mutate(random.Random(n), seed.body, seed, corpora[0])
            b = mutate(random.Random(n), seed.body, seed, corpora[0])
            assert a == b, name


def test_a_case_carries_its_id_as_correlation_id(corpora: list[list[Seed]]) -> None:
    singles = [c for c in (make_case(corpora, 1, i) for i in range(300)) if c.single]
    assert singles
    for case in singles:
        assert struct.unpack_from(">i", case.data)[0] == len(case.data) - 4
    # unless a mutation hit those four bytes (or cut them off)
    carried = [c for c in singles if c.correlation_id == c.case_id]
    assert len(carried) > 0.8 * len(singles)


def test_the_mutators_the_issue_asks_for_all_occur(corpora: list[list[Seed]]) -> None:
    cases = [make_case(corpora, 5, i) for i in range(4000)]
    used = {name for c in cases for name in c.mutators}
    assert used >= set(BODY_MUTATORS) | set(mutators.WIRE_MUTATORS)
    assert {c.node for c in cases} == {0, 1}
    assert any(not c.single for c in cases) and any(c.single for c in cases)


def test_length_lies_reach_two_to_the_31() -> None:
    """A huge compact count (the issue's 34 GB allocation) is among the lies."""
    seed = build_seed(3, 9, PLAUSIBLE)
    guard = request_guard(request_class(3, 9))
    huge = 0
    for n in range(400):
        body = mutators.length_lie(random.Random(n), seed.body, seed, [seed])
        if any(v >= 2**31 for v in _uvarints(body, seed)):
            huge += 1
            with pytest.raises(MalformedFrame):
                guard(body)
    assert huge > 50


def _uvarints(body: bytes, seed: Seed) -> list[int]:
    out = []
    for slot in seed.slots:
        if slot.kind in ("uvarint", "tags") and slot.offset < len(body):
            value, _ = mutators._read_uvarint(body, slot.offset)
            out.append(value)
    return out


def test_the_longest_client_id() -> None:
    seed = build_seed(11, 5, PLAUSIBLE)
    lengths = set()
    for n in range(30):
        body = mutators.long_client_id(random.Random(n), seed.body, seed, [seed])
        lengths.add(struct.unpack_from(">h", body, 8)[0])
    assert lengths == {mutators.LONGEST_CLIENT_ID}


def test_mutated_frames_decode_or_raise_protocol_error(corpora: list[list[Seed]]) -> None:
    for i in range(3000):
        case = make_case(corpora, 9, i)
        if not case.single:
            continue
        with contextlib.suppress(ProtocolError):  # nothing else may come out
            decode_request(case.data[4:])


def test_a_finding_file_round_trips(tmp_path: Path, corpora: list[list[Seed]]) -> None:
    case = make_case(corpora, 3, 17)
    path = save(Finding("crash", 1, "broker", "gone", [case], reproduced=True), tmp_path, 1)
    loaded = load(path)
    assert loaded.cases == [case]
    assert isinstance(loaded.cases[0], Case)
    (tmp_path / "bad.json").write_text('{"kind": "crash"}')
    with pytest.raises(FindingFileError):
        load(tmp_path / "bad.json")
