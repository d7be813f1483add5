"""The analysis layer: judges a run directory on PySpark.

``pipeline.analyze(run_dir, master=None) -> Verdict`` loads the history (``load``), builds the
shared projections once (``projections``), runs one checker module per anomaly class
(``checkers/``, each module docstring is that checker's written definition), and writes
``verdict.json`` (``verdict``) and a self-contained ``report.html`` (``report``).
``pipeline.main_analyze(run_dir, master)`` is the ``txnchaos analyze`` entry point (exit code 0
valid, 1 anomalies, 2 unreadable run directory). ``synthetic`` builds histories with injected
anomalies for the tests and ``bench/analysis.py``. ``reference`` states each checker's rule as
a short plain-Python function over named indexes of the history (no Spark), returning the same
anomaly rows; tests hold the two to agreement. The history schema itself lives in
``txnchaos.harness.history`` (shared with the recorder).
"""
