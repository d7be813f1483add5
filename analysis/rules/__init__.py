"""One module per checker, stating its rule: the module's docstring is the checker's definition
(printed in verdict.json and the report), and its ``rule(ix, facts)`` is the rule in plain
Python over the history's own types (analysis/model/), returning the checker's anomaly rows.
The registry (``registry.RULES``) lists them; the Spark engine implements each one in
spark/checkers/<name>.py (naming the rule it implements), and tests hold the two equal."""
