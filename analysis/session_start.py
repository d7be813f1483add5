"""A Spark session started ahead, in a background thread: ``txnchaos run`` knows while its
workload runs that it will judge the run, so the JVM starts then rather than after. Importing
this module imports no pyspark (the thread does)."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


class SessionStart:
    """One session, starting in a thread from :meth:`start`; :meth:`result` waits for it."""

    def __init__(self, master: str | None, app_name: str, conf: Mapping[str, str]) -> None:
        self.master, self.app_name, self.conf = master, app_name, dict(conf)
        self._thread = threading.Thread(target=self._run, name="txnchaos-spark-start", daemon=True)
        self._session: SparkSession | None = None
        self._error: BaseException | None = None
        self._began = 0.0
        #: seconds the session took to start (None while it starts)
        self.start_s: float | None = None

    def start(self) -> SessionStart:
        self._began = time.perf_counter()
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            from .spark.session import get_session

            self._session = get_session(self.master, self.app_name, None, self.conf)
        except BaseException as e:  # raised by result(), in the thread that judges
            self._error = e
        finally:
            self.start_s = time.perf_counter() - self._began

    def result(self) -> tuple[SparkSession, dict[str, Any]]:
        """The session (its start's error raised here) and how it started: in what time, and
        how long this call waited for it."""
        t = time.perf_counter()
        self._thread.join()
        waited = time.perf_counter() - t
        if self._error is not None:
            raise self._error
        assert self._session is not None and self.start_s is not None
        return self._session, {
            "session_start_s": round(self.start_s, 2),
            "session_wait_s": round(waited, 2),
        }
