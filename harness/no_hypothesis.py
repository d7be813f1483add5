"""Keep hypothesis out of the harness's processes (imported by the package's ``__init__``).

kio, the protocol library, registers hypothesis strategies for its types whenever hypothesis
is importable (a test dependency), and registering a text strategy makes hypothesis create a
``.hypothesis/`` directory in the current directory: ``txnchaos --help`` — and every node and
workload process — littered wherever it ran.  No command needs hypothesis, so a process that
has not imported it yet never will.  The test suite does use it (property tests): under
pytest nothing is blocked.
"""

from __future__ import annotations

import sys

if "hypothesis" not in sys.modules and "_pytest" not in sys.modules:
    sys.modules["hypothesis"] = None  # type: ignore[assignment]  # its import raises ImportError
