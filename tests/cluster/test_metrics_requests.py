"""Request metrics are plain counters exported by a collector under the same Prometheus
names as before; error codes come from kio responses and hand-encoded ones alike."""

from __future__ import annotations

from prometheus_client import generate_latest

from txnchaos.cluster.metrics import NodeMetrics
from txnchaos.cluster.protocol.build import make
from txnchaos.cluster.protocol.codec import EncodedResponse, response_class
from txnchaos.cluster.protocol.hot_codecs import end_txn_response


def exposition(metrics: NodeMetrics) -> dict[str, float]:
    samples = {}
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            samples[name] = float(value)
    return samples


def test_requests_errors_seconds_and_bytes_are_exported() -> None:
    metrics = NodeMetrics(1)
    assert exposition(metrics)["txnchaos_bytes_in_total"] == 0
    produce = make(
        response_class(0, 9),
        responses=[
            {
                "name": "t",
                "partition_responses": [
                    {"index": 0, "error_code": 6},
                    {"index": 1, "error_code": 0},
                ],
            }
        ],
    )
    metrics.observe(0, 9, produce, 0.25, 100, 50)
    metrics.observe(0, 9, None, 0.5, 10, 0)  # acks=0: no response
    metrics.observe(26, 1, EncodedResponse(26, 1, end_txn_response(1, 51), (51,)), 0.125, 20, 10)
    samples = exposition(metrics)
    assert samples['txnchaos_requests_total{api="produce"}'] == 2
    assert samples['txnchaos_requests_total{api="end_txn"}'] == 1
    assert samples['txnchaos_request_seconds_total{api="produce"}'] == 0.75
    assert (
        samples['txnchaos_request_errors_total{api="produce",error="not_leader_or_follower"}'] == 1
    )
    assert (
        samples['txnchaos_request_errors_total{api="end_txn",error="concurrent_transactions"}'] == 1
    )
    assert samples["txnchaos_bytes_in_total"] == 130
    assert samples["txnchaos_bytes_out_total"] == 60
    assert metrics.requests_served(0) == 2
    assert metrics.requests_served(1) == 0
