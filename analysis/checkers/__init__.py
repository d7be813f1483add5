"""One module per checker; each module docstring is the checker's written definition."""
