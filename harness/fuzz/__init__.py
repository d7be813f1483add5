"""``txnchaos fuzz``: the project's own protocol fuzzer.

Valid request frames for every API and version a node serves (:mod:`.seeds`, built from
kio's schemas) are mutated reproducibly (:mod:`.mutators`: a case id and a seed give the
exact bytes), sent to live brokers and coordinators over many connections at once
(:mod:`.target`), and after every batch each node must still answer a fresh connection,
be alive and stay within an RSS bound; its log must show no traceback (:mod:`.health`).
:mod:`.runner` drives the batches, narrows a failing batch down to the case that caused
it and saves that case's bytes (:mod:`.findings`), so ``txnchaos fuzz --replay FILE``
sends them again.
"""
