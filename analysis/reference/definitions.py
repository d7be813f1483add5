"""Each checker's written definition, read from its Spark module's docstring without importing
it (the reference engine never imports pyspark): one definition, whichever engine judges."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

CHECKERS_DIR = Path(__file__).resolve().parents[1] / "checkers"


@cache
def definition(checker: str) -> str:
    """The docstring of ``checkers/<checker>.py``, whitespace-normalised (as ``definition``
    in checkers/base.py makes it)."""
    tree = ast.parse((CHECKERS_DIR / f"{checker}.py").read_text(encoding="utf-8"))
    return " ".join((ast.get_docstring(tree, clean=False) or "").split())
