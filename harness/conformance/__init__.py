"""The differential conformance suite (``txnchaos conformance``): raw-request probes run
against Apache Kafka and against our cluster with the same settings, outcome against
outcome (docs/conformance.md)."""
