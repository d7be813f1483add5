"""Node-to-node networking: the project's own asyncio Kafka-protocol client."""
