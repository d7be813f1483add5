"""The judge every command of this layer hands the harness: the analysis's ``RunJudge`` with
the reproduction catalogue's resemblance (an invalid run's report names the known bugs it
resembles), so the analysis need not know the catalogue."""

from __future__ import annotations

from ..analysis.analyze import RunJudge
from ..harness.repro.resemblance import sentences


def run_judge(
    engine: str, master: str | None, app_name: str, input_uri: str | None = None
) -> RunJudge:
    """A judge on ``engine`` (Spark on ``master``), its Spark application named ``app_name``."""
    return RunJudge(engine, master, app_name=app_name, input_uri=input_uri, resembles=sentences)
