"""One module per rule (rules/), implementing it on Spark over the shared projections; each
names the rule it implements (``RULE``). schedule.py finds them and orders their work."""
