"""Deadlines keyed by name, checked against an injectable clock.

The coordinator never sleeps on a per-member timer: it keeps one deadline per key
(session expiry of a member, the join phase of a group, ...) and ``pop_expired``
hands back the keys whose deadline has passed. Re-scheduling a key replaces its
deadline; stale heap entries are skipped lazily.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable, Iterator


class Deadlines:
    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Hashable]] = []
        self._current: dict[Hashable, tuple[float, int]] = {}
        self._seq = itertools.count()

    def schedule(self, key: Hashable, deadline: float) -> None:
        seq = next(self._seq)
        self._current[key] = (deadline, seq)
        heapq.heappush(self._heap, (deadline, seq, key))

    def cancel(self, key: Hashable) -> None:
        self._current.pop(key, None)

    def get(self, key: Hashable) -> float | None:
        entry = self._current.get(key)
        return None if entry is None else entry[0]

    def __contains__(self, key: Hashable) -> bool:
        return key in self._current

    def snapshot(self) -> list[Hashable]:
        return list(self._current)

    def pop_expired(self, now: float) -> Iterator[Hashable]:
        """Yield (and forget) keys whose deadline is <= now, earliest first.

        Keys scheduled while iterating with a deadline <= now are yielded too.
        """
        while self._heap and self._heap[0][0] <= now:
            deadline, seq, key = heapq.heappop(self._heap)
            if self._current.get(key) == (deadline, seq):
                del self._current[key]
                yield key
        if len(self._heap) > 64 and len(self._heap) > 4 * len(self._current):
            self._heap = [(d, s, k) for k, (d, s) in self._current.items()]
            heapq.heapify(self._heap)

    def next_deadline(self) -> float | None:
        while self._heap:
            deadline, seq, key = self._heap[0]
            if self._current.get(key) == (deadline, seq):
                return deadline
            heapq.heappop(self._heap)
        return None
