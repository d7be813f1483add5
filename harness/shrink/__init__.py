"""``txnchaos shrink RUN_DIR``: the smallest scenario that still gives an invalid run's
anomaly class on the same seed, found by re-running.

* ``search`` — the reduction itself, over any "does this scenario still fail?" test:
  delta debugging over the fault schedule, then shorter workloads, then fewer users;
* ``attempts`` — that test done for real: one ``txnchaos run`` per candidate, judged
  like the original, within a time budget;
* ``command`` — reads the run directory and writes the reproducer beside it.
"""
