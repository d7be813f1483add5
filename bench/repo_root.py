"""Puts the repository root on ``sys.path`` so bench scripts can import ``txnchaos_testing``
(test support kept at the root, outside the installed ``txnchaos`` package)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
