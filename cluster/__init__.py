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

import sys as _sys


def _import_kio_without_hypothesis() -> None:
    """kio imports Hypothesis when it is installed (to register strategies for its
    phantom types), and importing Hypothesis writes a ``.hypothesis/`` directory into the
    working directory: every node and ``txnchaos`` command left one behind (issue 35).
    Outside a test session, kio is imported with Hypothesis hidden; nothing here uses
    those strategies, and Hypothesis stays importable afterwards."""
    if "kio.static._phantom" in _sys.modules or "hypothesis" in _sys.modules:
        return
    if "pytest" in _sys.modules:
        return  # tests may use kio's strategies
    hidden = ("hypothesis", "hypothesis.strategies")
    for name in hidden:
        _sys.modules[name] = None  # type: ignore[assignment]
    try:
        import kio.static._phantom  # noqa: F401
    finally:
        for name in hidden:
            _sys.modules.pop(name, None)


_import_kio_without_hypothesis()
