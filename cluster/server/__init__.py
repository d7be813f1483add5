"""The node's Kafka-protocol TCP server and the registry of APIs it serves."""
