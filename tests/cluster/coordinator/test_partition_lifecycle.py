"""The load/unload lifecycle both coordinators share: which partitions answer requests,
with which error, and what happens to a partition's state log on the way in and out."""

from __future__ import annotations

from pathlib import Path

import pytest
from kio.schema.errors import ErrorCode as E

from txnchaos.cluster.coordinator.partition_lifecycle import PartitionLifecycle
from txnchaos.cluster.storage.state_log import Record, StateLog


def lifecycle(tmp_path: Path, opened: list[StateLog]) -> PartitionLifecycle:
    def open_log(data_dir: Path, partition: int) -> StateLog:
        slog = StateLog(data_dir / f"p-{partition}.log")
        opened.append(slog)
        return slog

    return PartitionLifecycle(tmp_path / "data", 4, open_log)


def test_a_partition_answers_not_coordinator_until_loaded_and_after_unload(
    tmp_path: Path,
) -> None:
    parts = lifecycle(tmp_path, [])
    assert parts.error(1) == int(E.not_coordinator)
    seen: list[int] = []

    def rebuild(slog: StateLog) -> None:
        seen.append(parts.error(1))  # while replaying, requests wait
        slog.append(Record(b"k", b"v"))

    assert parts.load(1, rebuild)
    assert seen == [int(E.coordinator_load_in_progress)]
    assert parts.error(1) == int(E.none) and parts.loaded == {1}
    assert not parts.load(1, rebuild)  # already loaded: nothing replayed again
    assert seen == [int(E.coordinator_load_in_progress)]
    forgotten: list[int] = []
    assert parts.unload(1, lambda: forgotten.append(parts.error(1)))
    assert forgotten == [int(E.not_coordinator)]  # gone before its state is dropped
    assert parts.log(1) is None and not parts.unload(1, lambda: None)


def test_a_failed_rebuild_closes_the_log_and_leaves_the_partition_unloaded(
    tmp_path: Path,
) -> None:
    opened: list[StateLog] = []
    parts = lifecycle(tmp_path, opened)

    def rebuild(slog: StateLog) -> None:
        slog.append(Record(b"k", b"v"))
        raise OSError("disk gone")

    with pytest.raises(OSError, match="disk gone"):
        parts.load(2, rebuild)
    assert parts.error(2) == int(E.not_coordinator) and parts.log(2) is None
    assert not parts.any_loading
    assert opened[0]._fd is None  # closed


def test_partitions_out_of_range_are_refused(tmp_path: Path) -> None:
    parts = lifecycle(tmp_path, [])
    with pytest.raises(ValueError, match="out of range"):
        parts.load(4, lambda slog: None)
    assert list(parts.requested(None)) == [0, 1, 2, 3]
    assert list(parts.requested([2])) == [2]
