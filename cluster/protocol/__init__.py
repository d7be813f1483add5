"""The Kafka wire protocol: kio-based codec, message building, record batches."""
