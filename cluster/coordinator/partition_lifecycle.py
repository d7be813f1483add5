"""Which internal partitions a coordinator serves, and the state log of each.

The group and the transaction coordinator follow the same lifecycle for their internal
partitions (``__consumer_offsets`` / ``__transaction_state`` in Kafka): loading one
replays its state log into memory (requests for it get COORDINATOR_LOAD_IN_PROGRESS
meanwhile), unloading drops that state and closes the log (NOT_COORDINATOR afterwards).
Each coordinator supplies only what differs: how to open a log, what to rebuild from
it and what to forget.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

from kio.schema.errors import ErrorCode as E

from ..storage.state_log import StateLog

OpenLog = Callable[[Path, int], StateLog]
"""Opens the state log of one partition under a data directory."""


class PartitionLifecycle:
    """The loaded / loading partitions among ``num_partitions`` and their open logs."""

    def __init__(self, data_dir: Path, num_partitions: int, open_log: OpenLog) -> None:
        if num_partitions <= 0:
            raise ValueError("num_partitions must be positive")
        self.data_dir = Path(data_dir)
        self.num_partitions = num_partitions
        self._open_log = open_log
        self._logs: dict[int, StateLog] = {}
        self._loaded: set[int] = set()
        self._loading: set[int] = set()

    @property
    def loaded(self) -> frozenset[int]:
        return frozenset(self._loaded)

    def is_loaded(self, partition: int) -> bool:
        return partition in self._loaded

    @property
    def any_loading(self) -> bool:
        """Whether some partition is being loaded right now (listings answer
        COORDINATOR_LOAD_IN_PROGRESS then, as they would be incomplete)."""
        return bool(self._loading)

    def error(self, partition: int) -> int:
        """COORDINATOR_LOAD_IN_PROGRESS / NOT_COORDINATOR / NONE for a request on it."""
        if partition in self._loading:
            return int(E.coordinator_load_in_progress)
        if partition not in self._loaded:
            return int(E.not_coordinator)
        return int(E.none)

    def log(self, partition: int) -> StateLog | None:
        """The open state log of a loaded (or loading) partition."""
        return self._logs.get(partition)

    def requested(self, partitions: Iterable[int] | None) -> Iterable[int]:
        """The partitions to load at start: all of them unless told otherwise."""
        return range(self.num_partitions) if partitions is None else partitions

    def load(self, partition: int, rebuild: Callable[[StateLog], None]) -> bool:
        """Open the partition's log and let ``rebuild`` replay it into memory; the
        partition counts as loaded once that returns. False if it already was loaded.

        If ``rebuild`` raises, the log is closed again and the partition stays unloaded.
        """
        if partition in self._loaded:
            return False
        if not 0 <= partition < self.num_partitions:
            raise ValueError(f"partition {partition} out of range")
        self._loading.add(partition)
        try:
            self.data_dir.mkdir(parents=True, exist_ok=True)
            slog = self._open_log(self.data_dir, partition)
            self._logs[partition] = slog
            try:
                rebuild(slog)
            except BaseException:
                self._logs.pop(partition, None)
                slog.close()
                raise
        finally:
            self._loading.discard(partition)
        self._loaded.add(partition)
        return True

    def unload(self, partition: int, forget: Callable[[], None]) -> bool:
        """Stop serving the partition: ``forget`` drops its in-memory state, then its
        log is closed. False if it was not loaded."""
        if partition not in self._loaded:
            return False
        self._loaded.discard(partition)
        forget()
        slog = self._logs.pop(partition, None)
        if slog is not None:
            slog.close()
        return True
