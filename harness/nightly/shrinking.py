"""Shrinking a night's unexpectedly invalid run to a minimal reproducer (``txnchaos shrink``'s
search, within a budget per run), so the morning starts from the smallest scenario that still
fails rather than from a 30-second chaos run.  Shrinking only adds to a row: the run's verdict,
and so the night's exit code, stay as the run left them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from ..run.judge import Judge

if TYPE_CHECKING:  # the CLI imports this module: results pulls in the history's pyarrow
    from .results import RunRow

#: wall time one invalid run may spend on re-runs by default (``--shrink-budget``)
DEFAULT_SHRINK_BUDGET_S = 15 * 60.0


@dataclass(frozen=True)
class ShrinkPolicy:
    enabled: bool = True
    budget_s: float = DEFAULT_SHRINK_BUDGET_S


def wanted(row: RunRow) -> bool:
    """An invalid run its scenario did not expect (a scenario expecting invalid reproduces a
    known bug already)."""
    from .results import INVALID

    return row.verdict == INVALID and not row.passed


def shrink_row(row: RunRow, night_dir: Path, budget_s: float, judge: Judge) -> None:
    """Shrink ``row``'s run within ``budget_s`` and record the outcome in the row: the minimal
    scenario (relative to the night's directory), the re-runs it took, a one-line note.  Its
    output goes to a log of its own beside the run's."""
    from ..shrink.command import ShrinkError, shrink_run  # the run and analysis layers: heavy

    run_dir = night_dir / row.run_dir
    log = night_dir / "logs" / f"{Path(row.run_dir).name}-shrink.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    row.shrink_log = log.relative_to(night_dir).as_posix()
    with log.open("w", encoding="utf-8") as sink:
        console = Console(file=sink, width=120, no_color=True)
        try:
            result = shrink_run(run_dir, budget_s, judge, console=console)
        except ShrinkError as exc:
            row.shrink_note = f"not shrunk: {exc}"
            return
        except Exception as exc:  # the shrinker's own failure must not end the night
            console.print_exception()
            row.shrink_note = f"not shrunk: the shrinker failed ({type(exc).__name__}: {exc})"
            return
    row.shrink_reruns = result.reruns
    if result.scenario is None:
        row.shrink_note = (
            f"not reproduced in {_reruns(result.reruns)}: the anomaly needs timing a re-run "
            "did not repeat"
        )
        return
    row.shrunk = result.scenario.relative_to(night_dir).as_posix()
    change = f"{result.before} -> {result.after}" if result.smaller else "nothing smaller fails"
    row.shrink_note = f"minimal scenario in {_reruns(result.reruns)}: {change}"


def _reruns(n: int) -> str:
    return f"{n} re-run{'' if n == 1 else 's'}"
