"""The harness: launching clusters (local processes, containers, or an external
cluster), the fault proxy and other faults (the nemesis), workloads, history and
metric capture, and the ``txnchaos`` command line."""

from . import no_hypothesis  # noqa: F401  (no .hypothesis/ directory from kio's imports)
