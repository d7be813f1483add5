"""Judging a run directory: with the PySpark pipeline (the default), or with the plain-Python
rules (``--engine reference``: the test oracle, a quick look without a JVM), or ``auto`` (the
rules for histories small enough that Spark's start-up would cost more than the judging).

``analyze(run_dir, master, engine)`` returns the :class:`Verdict` (its ``engine`` says which
judged); a :class:`RunJudge` is what ``txnchaos analyze``, ``run``, ``nightly``, ``repro`` and
``shrink`` judge with (the harness's ``Judge``): one engine and, for Spark, one session for
every run it judges, started ahead when a run says it will be judged (``warm``); it prints a
summary and returns the exit code — 0 valid, 1 anomalies found, 2 the run directory is
unreadable.  Importing this module imports no pyspark (nor does the reference path).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import pyarrow.parquet as pq

from ..rundir.run_dir import RunDir, RunDirError
from ..rundir.verdict_file import REPORT_HTML, VERDICT_JSON
from .load import prepare_run
from .session_start import SessionStart
from .verdict import AUTO, ENGINES, REFERENCE, SPARK, Resembles, Verdict

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: history rows up to which the reference judges faster than Spark starts and judges
#: (measured by bench/reference.py: its row in bench/README.md); for ``--engine auto``
REFERENCE_MAX_ROWS = 200_000


def history_rows(run: RunDir) -> int:
    """Rows of the run's history.parquet (one per item), from its footer."""
    assert run.history_parquet is not None
    return int(pq.ParquetFile(run.history_parquet).metadata.num_rows)


def choose_engine(run: RunDir, engine: str = SPARK, master: str | None = None) -> str:
    """``engine`` itself unless ``auto``: then Spark for a given master or a history of more
    than :data:`REFERENCE_MAX_ROWS` rows, else the reference."""
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine != AUTO:
        return engine
    if master is not None or history_rows(run) > REFERENCE_MAX_ROWS:
        return SPARK
    return REFERENCE


def analyze(
    run_dir: str | os.PathLike[str],
    master: str | None = None,
    engine: str = SPARK,
    *,
    examples: int = 5,
    write: bool = True,
    input_uri: str | None = None,
    resembles: Resembles | None = None,
) -> Verdict:
    """Judge one run directory with ``engine`` (see :func:`choose_engine`; Spark when its
    executors read a copy at ``input_uri``); the report of an invalid run names the known
    bugs ``resembles`` finds.  Raises :class:`RunDirError` if the run directory cannot be read
    or a Spark setting is bad."""
    judge = RunJudge(engine, master, input_uri=input_uri, resembles=resembles)
    return judge.verdict(run_dir, examples=examples, write=write)


@dataclass
class RunJudge:
    """Judges run directories with one engine (and one Spark session): what the commands
    that judge runs hand the harness (it satisfies harness/run/judge.py's ``Judge`` without
    importing the harness)."""

    engine: str = SPARK
    master: str | None = None
    #: Spark settings the session gets (``--conf K=V``), over ours
    conf: Mapping[str, str] = field(default_factory=dict)
    #: the Spark application's name
    app_name: str = "txnchaos"
    #: where a cluster's executors read the run directory's Parquet files (input_uri.py)
    input_uri: str | None = None
    #: the known bugs an invalid run resembles (the reproduction catalogue's: jobs/ gives it)
    resembles: Resembles | None = None
    #: a session to judge on (a test's); None: one is started (ahead, by :meth:`warm`)
    spark: SparkSession | None = None
    _start: SessionStart | None = field(default=None, init=False, repr=False)
    #: how long this judge's session took to start (None: none started here)
    _start_s: float | None = field(default=None, init=False, repr=False)

    def warm(self) -> None:
        """A run is under way that this judge will judge: start the Spark session now, in the
        background (nothing for the reference engine, or for ``auto`` without a master, which
        may not need Spark)."""
        if self.spark is not None or self._start is not None or not self._wants_spark():
            return
        self._start = SessionStart(self.master, self.app_name, self.conf).start()

    def _wants_spark(self) -> bool:
        return self.engine == SPARK or (self.engine == AUTO and self.master is not None)

    def verdict(
        self, run_dir: str | os.PathLike[str], *, examples: int = 5, write: bool = True
    ) -> Verdict:
        """The verdict of ``run_dir`` (written into it unless ``write`` is false). Raises
        :class:`RunDirError` if it cannot be read, or a Spark setting is bad."""
        t0 = time.perf_counter()
        run = prepare_run(run_dir)
        chosen = (
            SPARK if self.input_uri is not None else choose_engine(run, self.engine, self.master)
        )
        if chosen == REFERENCE:
            from .reference.verdict import reference_verdict

            validate = {"validate_s": time.perf_counter() - t0}
            return reference_verdict(
                run_dir,
                run,
                examples=examples,
                write=write,
                timings=validate,
                resembles=self.resembles,
            )
        return self._spark_verdict(run_dir, run, examples, write)

    def _spark_verdict(
        self, run_dir: str | os.PathLike[str], run: RunDir, examples: int, write: bool
    ) -> Verdict:
        """The Spark pipeline's verdict; a bad ``TXNCHAOS_SPARK_*`` or ``--conf`` setting, or a
        file Spark could not read, raised as :class:`RunDirError`."""
        from .load import unreadable_file
        from .spark import SparkSettingsError
        from .spark.pipeline import analyze as spark_analyze

        try:
            spark, session = self._session(run)
            return spark_analyze(
                run_dir,
                self.master,
                spark=spark,
                session=session,
                examples=examples,
                write=write,
                input_uri=self.input_uri,
                resembles=self.resembles,
            )
        except SparkSettingsError as e:
            raise RunDirError(str(e)) from e
        except RunDirError:
            raise
        except Exception as e:  # a Spark job failed: one line if it was reading a broken file
            unreadable = unreadable_file(e)
            if unreadable is None:
                raise
            raise RunDirError(unreadable) from e

    def _session(self, run: RunDir) -> tuple[SparkSession, dict[str, Any]]:
        """The session to judge on, and how it started: handed in, started ahead while the run
        went on (:meth:`warm`), started now (its JIT chosen by this history's size), or up
        since an earlier run."""
        if self.spark is not None:
            if self._start_s is None:
                return self.spark, {"session": "given"}
            return self.spark, {"session": "reused", "session_start_s": self._start_s}
        try:
            if self._start is not None:
                spark, started = self._start.result()
                how = "started during the run"
            else:
                from .spark.session import get_session

                t = time.perf_counter()
                spark = get_session(self.master, self.app_name, history_rows(run), self.conf)
                took = round(time.perf_counter() - t, 2)
                started = {"session_start_s": took, "session_wait_s": took}
                how = "started for this analysis"
        except Exception as e:
            from .spark import SparkSettingsError

            if isinstance(e, SparkSettingsError):
                raise
            why = " ".join(str(e).split())[:300]
            raise RunDirError(f"the Spark session did not start (is java installed?): {why}") from e
        self.spark, self._start_s = spark, started["session_start_s"]
        return spark, {"session": how, **started, **self._conf_seen(spark)}

    def _conf_seen(self, spark: SparkSession) -> dict[str, Any]:
        """The ``--conf`` settings as the session holds them (for the verdict)."""
        if not self.conf:
            return {}
        held = spark.sparkContext.getConf()
        return {"conf": {k: held.get(k) for k in sorted(self.conf)}}

    def judge(self, run_dir: str | os.PathLike[str], out: TextIO | None = None) -> int:
        """Judge ``run_dir``: write verdict.json and report.html, print a summary to ``out``
        (default stdout); 0 valid, 1 anomalies found, 2 unreadable (said on stderr, or on
        ``out`` when given)."""
        try:
            verdict = self.verdict(run_dir)
        except RunDirError as e:
            print(f"txnchaos analyze: {e}", file=out or sys.stderr, flush=True)
            return 2
        print(verdict.summary(), file=out or sys.stdout)
        print(f"wrote {Path(run_dir) / VERDICT_JSON} and {Path(run_dir) / REPORT_HTML}", file=out)
        return verdict.exit_code


def main_analyze(
    run_dir: str | os.PathLike[str],
    master: str | None = None,
    engine: str = SPARK,
    input_uri: str | None = None,
) -> int:
    """``txnchaos analyze RUN_DIR [--master URL] [--engine E]``: see :meth:`RunJudge.judge`."""
    return RunJudge(engine, master, input_uri=input_uri).judge(run_dir)
