"""The append-only key/value state log: replay, torn tails, batches, compaction."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from txnchaos.cluster.storage.state_log import Record, StateLog, encode_frame, scan


def test_append_replay_and_load(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    log = StateLog(path)
    log.append(Record(b"a", b"1"))
    log.append(Record(b"b", b"2"))
    log.append_batch([Record(b"a", b"3"), Record(b"c", b"")])
    log.append(Record(b"b", None))
    log.close()
    again = StateLog(path)
    assert list(again.replay()) == [
        Record(b"a", b"1"),
        Record(b"b", b"2"),
        Record(b"a", b"3"),
        Record(b"c", b""),
        Record(b"b", None),
    ]
    assert again.load() == {b"a": b"3", b"c": b""}
    assert again.size == path.stat().st_size


def test_missing_file_is_empty(tmp_path: Path) -> None:
    log = StateLog(tmp_path / "sub" / "p.log")
    assert log.load() == {}
    log.append(Record(b"k", b"v"))
    assert StateLog(tmp_path / "sub" / "p.log").load() == {b"k": b"v"}


def test_torn_tail_is_truncated_and_appends_continue(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    log = StateLog(path)
    log.append(Record(b"k1", b"v1"))
    good = path.stat().st_size
    log.append(Record(b"k2", b"v2" * 100))
    log.close()
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 7)  # the second frame was half written
    recovered = StateLog(path)
    assert recovered.load() == {b"k1": b"v1"}
    assert path.stat().st_size == good
    recovered.append(Record(b"k3", b"v3"))
    recovered.close()
    assert StateLog(path).load() == {b"k1": b"v1", b"k3": b"v3"}


def test_corrupt_tail_crc_is_truncated(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    log = StateLog(path)
    log.append(Record(b"k1", b"v1"))
    log.append(Record(b"k2", b"v2"))
    log.close()
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF
    path.write_bytes(bytes(data))
    assert StateLog(path).load() == {b"k1": b"v1"}


def test_garbage_header_tail(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    log = StateLog(path)
    log.append(Record(b"k1", b"v1"))
    log.close()
    with open(path, "ab") as fh:
        fh.write(b"\xff\xff\xff\xff\x00\x00")  # absurd length, short header
    assert StateLog(path).load() == {b"k1": b"v1"}


def test_torn_batch_loses_all_its_records(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    log = StateLog(path)
    log.append(Record(b"before", b"1"))
    log.append_batch([Record(b"x", b"1"), Record(b"y", b"2")])
    log.close()
    with open(path, "r+b") as fh:
        fh.truncate(path.stat().st_size - 3)
    assert StateLog(path).load() == {b"before": b"1"}


def test_compaction_rewrites_live_records(tmp_path: Path) -> None:
    path = tmp_path / "p.log"
    log = StateLog(path, compact_min_bytes=1000)
    for i in range(200):
        log.append(Record(b"key", str(i).encode()))
    assert log.needs_compaction()
    log.compact([Record(b"key", b"199"), Record(b"gone", None)])
    assert not log.needs_compaction()
    assert path.stat().st_size == log.size < 100
    assert not list(tmp_path.glob("*.tmp"))
    log.append(Record(b"other", b"x"))
    log.close()
    assert StateLog(path).load() == {b"key": b"199", b"other": b"x"}


def test_scan_stops_at_first_bad_frame() -> None:
    frames = encode_frame([Record(b"a", b"1")]) + b"\x00" * 3
    records, valid = scan(frames)
    assert records == [Record(b"a", b"1")] and valid == len(frames) - 3


keys = st.sampled_from([b"a", b"b", b"c", b"d"])
ops = st.lists(
    st.lists(st.tuples(keys, st.one_of(st.none(), st.binary(max_size=20))), min_size=1, max_size=3),
    max_size=15,
)


@settings(max_examples=60, deadline=None)
@given(batches=ops, cut=st.integers(min_value=0, max_value=10_000))
def test_recovery_is_always_a_prefix_of_batches(
    batches: list[list[tuple[bytes, bytes | None]]], cut: int
) -> None:
    """After truncating the file anywhere, the state equals the state after some
    prefix of the appended batches (batches are atomic)."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.log"
        log = StateLog(path)
        assert log.load() == {}  # creates the file
        states: list[dict[bytes, bytes]] = [{}]
        state: dict[bytes, bytes] = {}
        for batch in batches:
            log.append_batch([Record(k, v) for k, v in batch])
            for k, v in batch:
                if v is None:
                    state.pop(k, None)
                else:
                    state[k] = v
            states.append(dict(state))
        log.close()
        size = path.stat().st_size
        with open(path, "r+b") as fh:
            fh.truncate(min(cut, size))
        recovered = StateLog(path)
        loaded = recovered.load()
        assert loaded in states
        if cut >= size:
            assert loaded == states[-1]
        recovered.append(Record(b"z", b"z"))
        recovered.close()
        assert StateLog(path).load() == {**loaded, b"z": b"z"}
