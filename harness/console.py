"""The one rich Console the command line prints through.

On a terminal it takes the terminal's width.  Anywhere else — a pipe, a file, a CI log — rich
would wrap at 80 columns (or ``COLUMNS``), cutting paths, commands and table cells in two; there
lines are never wrapped (``soft_wrap``) and tables get :data:`WIDTH` columns.
"""

from __future__ import annotations

import sys
from typing import IO, Any

from rich.console import Console

#: the width of tables and rules when the output is not a terminal
WIDTH = 200


def make_console(file: IO[str] | None = None, **kwargs: Any) -> Console:
    """A Console for ``file`` (stdout by default): unwrapped unless it is a terminal."""
    stream = file if file is not None else sys.stdout
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    if not terminal and "width" not in kwargs:  # COLUMNS too is a terminal's width, not a log's
        kwargs.setdefault("width", WIDTH)
        kwargs.setdefault("soft_wrap", True)
    return Console(file=file, **kwargs)
