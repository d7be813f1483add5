"""A thread that runs one sampling round every ``interval`` seconds until stopped."""

from __future__ import annotations

import threading
import time
from typing import Self


class PeriodicSampler:
    """Subclasses implement :meth:`sample_once`; a failing round must not raise."""

    name = "sampler"

    def __init__(self, interval: float) -> None:
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample_once(self) -> object:
        raise NotImplementedError

    def _loop(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self.sample_once()
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - started)))

    def start(self) -> Self:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
        self.close()

    def close(self) -> None:
        """Release what the rounds opened (after the thread has ended)."""
