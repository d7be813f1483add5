"""The analysis layer: judges a run directory.

Each checker's rule is stated once, in ``rules/<checker>.py``: the module's docstring is its
definition (verdict.json and the report print it) and ``rule(ix, facts)`` is the rule in plain
Python over the history's own types (``model/``); ``rules/registry.py`` lists them. Two engines
judge by those rules: the PySpark pipeline (``spark/``: the session and its tuning, the shared
projections, and ``spark/checkers/<checker>.py``, each implementing the rule it names), which
judges every run by default, and the plain-Python engine (``reference/``), the test oracle every
Spark verdict is held equal to and ``--engine reference`` for a quick look. Both verdicts are
built by one builder (``assemble.py``) into ``verdict.json`` (``verdict.py``) and a
self-contained ``report.html`` (``report/``). ``analyze.RunJudge`` is what the commands that
judge runs use (exit code 0 valid, 1 anomalies, 2 unreadable run directory). The run directory's
format is the layer below (``txnchaos.rundir``); this layer never imports the harness.
"""
