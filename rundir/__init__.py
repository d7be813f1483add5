"""The run directory's format, shared by the harness that writes it and the analysis that
reads it: the history schema (``schema``), the per-process writer (``writer``) and its JSON
Lines reader (``jsonl``), compaction to Parquet (``compact``), the layout and ``run.json``
(``run_dir``), the final state (``final_state``), the dual writers' databases
(``dual_write_db``), the fault log (``fault_log``) and the nemesis log (``outcome_log``).

This layer sits between the cluster and the two layers above it (harness, analysis), neither
of which imports the other. Importing the package itself is cheap: import the module you need.
"""
