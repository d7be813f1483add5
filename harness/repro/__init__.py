"""``txnchaos repro``: the catalogue of reproducible hanging-transaction bugs.

Each entry is a scenario file in ``scenarios/repro/`` with a ``repro:`` block
(:mod:`.spec`): the bug report and design section (KIP) it recreates, what a user sees, and
its configurations — the cluster settings that make the bug present or close it
(a ``txnchaos.bug.*`` switch, a ``transaction.version``) — each with the verdict it
predicts. ``txnchaos repro NAME`` runs every configuration (or the one chosen) and
exits 0 when each verdict is the predicted one: the bug detected where it is
present, a valid run where the defense holds.
"""
