"""Apache Kafka as the cluster under test (``--launcher kafka``)."""
