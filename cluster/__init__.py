"""The cluster under test: txnchaos's own Kafka-protocol nodes.

``node.py`` assembles one node process from role components:

* ``protocol/`` message codec (kio schemas), record-batch headers, record encoding
* ``server/`` the TCP server (framing, in-order answers, bad-input handling) and the
  API registry that ApiVersions is answered from
* ``storage/`` segmented partition logs with offset/time indexes and crash recovery
* ``broker/`` partitions, idempotent producer state, Produce/Fetch/ListOffsets/...
* ``controller/`` cluster metadata: topics, assignments, broker liveness, producer ids
* ``coordinator/`` the coordinator role: consumer groups (and next, transactions)
* ``cluster_info/`` Metadata, DescribeCluster, DescribeConfigs, FindCoordinator
* ``net/`` the node-to-node Kafka-protocol client
"""
