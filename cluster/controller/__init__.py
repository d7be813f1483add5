"""Cluster metadata: topics, partition-to-broker assignment, broker registration and
liveness, and producer-id blocks. Hosted by the coordinator role; brokers reach it
with ordinary Kafka requests."""
