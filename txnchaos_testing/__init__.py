"""Test support shared by tests/ and bench/: not part of the installed ``txnchaos`` package.

``synthetic`` simulates transactional runs and writes their run directories (history,
metrics, faults, final state) with injected anomalies, so the analysis can be tested and
timed without a cluster. pytest finds this package from the repository root; bench scripts
put the root on ``sys.path`` themselves (``bench/repo_root.py``).
"""
