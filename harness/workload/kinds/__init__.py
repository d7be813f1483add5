"""User kinds: one module per kind (its spec, its worker and its :class:`~.kind.UserKind`
entry), listed once in :mod:`.registry`, from which every per-kind table is derived.

Nothing here imports locust: the locust user classes are built from the entries in the
workload process (:mod:`..users`).
"""
