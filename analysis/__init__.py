"""The analysis layer: judges a run directory on PySpark, or small ones in plain Python.

``pipeline.analyze(run_dir, master=None) -> Verdict`` loads the history (``load``), builds the
shared projections once (``projections``), runs one checker module per anomaly class
(``checkers/``, each module docstring is that checker's written definition; ``checkers.registry``
lists them and derives the schedule from what each reads) on the Spark engine (``engine/``:
session, local JVM tuning, class archive, parallel scheduling, packed keys), and writes
``verdict.json`` (``verdict``) and a self-contained ``report.html`` (``report``).
``analyze.main_analyze(run_dir, master, engine)`` is the ``txnchaos analyze`` entry point (exit
code 0 valid, 1 anomalies, 2 unreadable run directory). ``reference`` states each checker's rule
as a short plain-Python function over named indexes of the history (no Spark), returning the
same anomaly rows; tests hold the two to agreement, and ``analyze`` judges small histories with
it (``reference.verdict``), without a JVM. The history schema itself lives in
``txnchaos.rundir`` (shared with the recorder).
"""
