"""The official Java client (org.apache.kafka:kafka-clients) as workload users: a small Java
program (``src/``) runs one user's clients and executes the commands its Python worker sends
over a line protocol (:mod:`.lines`); the recording, the history, the timing and every decision
stay in Python (:mod:`.producer`, :mod:`.consumer`). The user kinds are in
``harness/workload/kinds/java_*.py``; ``docs/java-client.md`` describes them."""
