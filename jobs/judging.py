"""The judge every command of this layer hands the harness: the analysis's ``RunJudge`` with
the reproduction catalogue's resemblance (an invalid run's report names the known bugs it
resembles), so the analysis need not know the catalogue; and ``txnchaos analyze``'s way to a
verdict: compact what the harness left uncompacted (the writer side's compaction), then judge
(the analysis reads the run directory only)."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from ..analysis.analyze import RunJudge
from ..harness.repro.resemblance import sentences


def run_judge(
    engine: str,
    master: str | None,
    app_name: str,
    input_uri: str | None = None,
    conf: Mapping[str, str] | None = None,
) -> RunJudge:
    """A judge on ``engine`` (Spark on ``master``, with ``conf`` over its settings), its Spark
    application named ``app_name``."""
    return RunJudge(
        engine,
        master,
        conf=dict(conf or {}),
        app_name=app_name,
        input_uri=input_uri,
        resembles=sentences,
    )


def analyze_run_dir(
    run_dir: str | os.PathLike[str], judge: RunJudge, out: TextIO | None = None
) -> int:
    """``txnchaos analyze``: compact a run the harness left as JSON Lines (a run whose harness
    died), then judge it (exit codes as ``RunJudge.judge``'s; a bad line: 2, naming it)."""
    from ..rundir.compact import compact_run
    from ..rundir.run_dir import RunDirError

    try:
        done = compact_run(run_dir)
    except RunDirError as e:
        print(f"txnchaos analyze: {e}", file=out or sys.stderr, flush=True)
        return 2
    except OSError as e:
        print(f"txnchaos analyze: cannot compact {Path(run_dir)}: {e}", file=out or sys.stderr)
        return 2
    for line in done:
        print(f"{line} (the run's harness had not)", file=out or sys.stdout)
    return judge.judge(run_dir, out)
