"""A Spark session started ahead, in a background thread: ``txnchaos run`` knows while its
workload runs that it will judge the run, so the JVM starts then rather than after, and warms
up on a tiny run (spark/warm_up.py) so that the real analysis runs on compiled code. Importing
this module imports no pyspark (the thread does)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


#: ``TXNCHAOS_SPARK_WARM_UP=0`` starts sessions ahead without warming them up
WARM_UP_SWITCH = "TXNCHAOS_SPARK_WARM_UP"


def warm_up_wanted() -> bool:
    return os.environ.get(WARM_UP_SWITCH, "1").strip().lower() not in ("0", "false", "no", "off")


class SessionStart:
    """One session, starting in a thread from :meth:`start`; :meth:`result` waits for it."""

    def __init__(
        self,
        master: str | None,
        app_name: str,
        conf: Mapping[str, str],
        warm_up: bool | None = None,
    ) -> None:
        self.master, self.app_name, self.conf = master, app_name, dict(conf)
        self.warm_up = warm_up_wanted() if warm_up is None else warm_up
        #: seconds the warm-up took (None: none, or not done yet)
        self.warm_up_s: float | None = None
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
            from .spark.local_jvm import is_local
            from .spark.session import get_session

            session = get_session(self.master, self.app_name, None, self.conf)
            self.start_s = time.perf_counter() - self._began
            self._session = session
        except BaseException as e:  # raised by result(), in the thread that judges
            self._error = e
            self.start_s = time.perf_counter() - self._began
            return
        if self.warm_up and is_local(str(session.sparkContext.master)):
            # a cluster's executors could not read the scratch run on this machine
            self._warm(session)

    def _warm(self, session: SparkSession) -> None:
        """Warm the session up; a failure only costs the warm-up (the real analysis will say
        what is wrong, if anything)."""
        from .spark.warm_up import warm_up

        t = time.perf_counter()
        try:
            warm_up(session)
        except Exception:
            return
        self.warm_up_s = time.perf_counter() - t

    def result(self) -> tuple[SparkSession, dict[str, Any]]:
        """The session (its start's error raised here) and how it started: in what time, and
        how long this call waited for it."""
        t = time.perf_counter()
        self._thread.join()
        waited = time.perf_counter() - t
        if self._error is not None:
            raise self._error
        assert self._session is not None and self.start_s is not None
        started: dict[str, Any] = {
            "session_start_s": round(self.start_s, 2),
            "session_wait_s": round(waited, 2),
        }
        if self.warm_up_s is not None:
            started["warm_up_s"] = round(self.warm_up_s, 2)
        return self._session, started
