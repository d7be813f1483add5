"""``txnchaos nightly``: many seeded runs of one or more scenarios, one after another,
summarised for people (summary.html, a trend page across nights) and for CI
(summary.json, junit.xml).

* ``plan`` — which scenario runs with which seed, and when a time budget is spent;
* ``runner`` — one ``txnchaos run`` in its own process (a run that crashes or hangs its
  harness cannot take the night down with it);
* ``results`` — what a finished run directory says (verdict, anomalies, throughput);
* ``shrinking`` — an unexpectedly invalid run shrunk to a minimal reproducer (``txnchaos
  shrink``'s search, within a budget per run);
* ``junit`` / ``pages`` — the CI file and the HTML pages;
* ``command`` — the loop the CLI calls.
"""
