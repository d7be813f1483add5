"""``txnchaos run``: scenario files and the orchestrator that turns one into a judged run."""
