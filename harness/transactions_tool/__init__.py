"""``txnchaos transactions``: KIP-664's tooling for hanging transactions (list, describe,
describe-producers, find-hanging, abort) over the Kafka protocol."""
