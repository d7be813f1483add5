"""The analysis: a PySpark pipeline that judges a run directory.

Checkers (one module each under ``checkers/``, each with its written definition)
find exactly-once anomalies, hanging transactions and wrong metrics; ``pipeline.py``
runs them and writes ``verdict.json`` and ``report.html``.
"""
