"""Judging a run directory with the engine that suits it: Spark, or the plain-Python reference
checkers for histories small enough that Spark's start-up would cost more than the judging.

``analyze(run_dir, master, engine)`` returns the :class:`Verdict` (its ``engine`` says which
judged); a :class:`RunJudge` is what ``txnchaos analyze``, ``run``, ``nightly``, ``repro`` and
``shrink`` judge with (the harness's ``Judge``: it prints a summary and returns the exit code —
0 valid, 1 anomalies found, 2 the run directory is unreadable).  This module and the reference
path never import pyspark.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import pyarrow.parquet as pq

from ..rundir.run_dir import RunDir, RunDirError
from ..rundir.verdict_file import REPORT_HTML, VERDICT_JSON
from .load import prepare_run
from .verdict import AUTO, ENGINES, REFERENCE, SPARK, Resembles, Verdict

#: history rows up to which the reference judges faster than Spark starts and judges
#: (measured by bench/reference.py: its row in bench/README.md)
REFERENCE_MAX_ROWS = 200_000


def history_rows(run: RunDir) -> int:
    """Rows of the run's history.parquet (one per item), from its footer."""
    assert run.history_parquet is not None
    return int(pq.ParquetFile(run.history_parquet).metadata.num_rows)


def choose_engine(run: RunDir, engine: str = AUTO, master: str | None = None) -> str:
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
    engine: str = AUTO,
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
    t0 = time.perf_counter()
    run = prepare_run(run_dir)
    chosen = SPARK if input_uri is not None else choose_engine(run, engine, master)
    if chosen == REFERENCE:
        from .reference.verdict import reference_verdict

        validate = {"validate_s": time.perf_counter() - t0}
        return reference_verdict(
            run_dir, run, examples=examples, write=write, timings=validate, resembles=resembles
        )
    return _spark_verdict(run_dir, master, examples, write, input_uri, resembles)


def _spark_verdict(
    run_dir: str | os.PathLike[str],
    master: str | None,
    examples: int,
    write: bool,
    input_uri: str | None = None,
    resembles: Resembles | None = None,
) -> Verdict:
    """The Spark pipeline's verdict; a bad ``TXNCHAOS_SPARK_*`` setting or a file Spark could
    not read raised as :class:`RunDirError`."""
    from .load import unreadable_file
    from .spark import SparkSettingsError
    from .spark.pipeline import analyze as spark_analyze

    try:
        return spark_analyze(
            run_dir,
            master,
            examples=examples,
            write=write,
            input_uri=input_uri,
            resembles=resembles,
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


@dataclass
class RunJudge:
    """Judges run directories with one engine: what the commands that judge runs hand the
    harness (it satisfies harness/run/judge.py's ``Judge`` without importing the harness)."""

    engine: str = AUTO
    master: str | None = None
    #: Spark settings the session gets (``--conf K=V``)
    conf: Mapping[str, str] = field(default_factory=dict)
    #: the Spark application's name
    app_name: str = "txnchaos"
    #: where a cluster's executors read the run directory's Parquet files (input_uri.py)
    input_uri: str | None = None
    #: the known bugs an invalid run resembles (the reproduction catalogue's: jobs/ gives it)
    resembles: Resembles | None = None

    def warm(self) -> None:
        """Nothing to start ahead yet."""

    def judge(self, run_dir: str | os.PathLike[str], out: TextIO | None = None) -> int:
        """Judge ``run_dir``: write verdict.json and report.html, print a summary to ``out``
        (default stdout); 0 valid, 1 anomalies found, 2 unreadable (said on stderr, or on
        ``out`` when given)."""
        try:
            verdict = analyze(
                run_dir,
                self.master,
                self.engine,
                input_uri=self.input_uri,
                resembles=self.resembles,
            )
        except RunDirError as e:
            print(f"txnchaos analyze: {e}", file=out or sys.stderr, flush=True)
            return 2
        print(verdict.summary(), file=out or sys.stdout)
        print(f"wrote {Path(run_dir) / VERDICT_JSON} and {Path(run_dir) / REPORT_HTML}", file=out)
        return verdict.exit_code


def main_analyze(
    run_dir: str | os.PathLike[str],
    master: str | None = None,
    engine: str = AUTO,
    input_uri: str | None = None,
) -> int:
    """``txnchaos analyze RUN_DIR [--master URL] [--engine E]``: see :meth:`RunJudge.judge`."""
    return RunJudge(engine, master, input_uri=input_uri).judge(run_dir)
