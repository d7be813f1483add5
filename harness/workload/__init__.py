"""Workloads: locust users that drive confluent-kafka clients and record a complete history.

Modules: :mod:`.config` (the scenario's workload section), :mod:`.kinds` (one module per user
kind: spec, worker and registry entry; :mod:`.kinds.registry` lists them), :mod:`.spec` and
:mod:`.workers` (what the kinds' specs and workers share), :mod:`.recording` (the history a
producer client records, whatever its library), :mod:`.clients` (confluent-kafka clients),
:mod:`.ours` (our own producer client), :mod:`.users` (locust users),
:mod:`.runner` (locust as a library: local, web UI, distributed), :mod:`.load_shape` (a load
test's rate profile, without locust), :mod:`.crash` /
:mod:`.crashable` (client processes that can be SIGKILLed), :mod:`.final_read` (the final
read_committed read of every partition).

This package's ``__init__`` imports nothing heavy: importing :mod:`.users` or :mod:`.runner`
imports locust, which monkey-patches the whole process with gevent, so those must be imported
first by an entry point (before anything that starts threads).
"""
