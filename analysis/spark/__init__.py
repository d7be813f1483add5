"""The Spark engine behind the checkers: the session and its settings (session.py), the local
JVM's tuning, never applied to a remote master (local_jvm.py), the class archive that speeds a
local JVM's start (class_archive.py), running independent Spark work at once (parallel.py), and
names packed into numbers for Spark's fixed-width aggregations (packed_keys.py)."""

from .local_jvm import SparkSettingsError
from .parallel import run_parallel, shared_property
from .session import get_session, history_rows, session_conf, tune_session

__all__ = [
    "SparkSettingsError",
    "get_session",
    "history_rows",
    "run_parallel",
    "session_conf",
    "shared_property",
    "tune_session",
]
