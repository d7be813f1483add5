"""An external cluster's metrics endpoints, given as ``NODE=URL`` (``--metrics-url``) or as the
scenario's ``cluster.metrics`` mapping: the harness scrapes each node's Prometheus text
exposition, as it does for the nodes it runs, so the metrics checker can judge them."""

from __future__ import annotations

from urllib.parse import urlsplit


def metrics_url_problem(node: object, url: object) -> str | None:
    """Why ``node``/``url`` cannot be a node's metrics endpoint, or None."""
    if isinstance(node, bool) or not isinstance(node, int) or node < 0:
        return f"metrics: node id {node!r} is not a non-negative integer"
    if not isinstance(url, str):
        return f"metrics: node {node}: the URL must be a string, got {url!r}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"metrics: node {node}: {url!r} is not an http:// or https:// URL"
    return None


def parse_metrics_url(text: str) -> tuple[int, str]:
    """``NODE=URL`` -> (node id, URL); ValueError saying what is wrong."""
    node, sep, url = text.partition("=")
    if not sep or not node.strip().isdigit():
        raise ValueError(f"expected NODE=URL (e.g. 1=http://host:9404/metrics), got {text!r}")
    node_id = int(node.strip())
    problem = metrics_url_problem(node_id, url.strip())
    if problem:
        raise ValueError(problem)
    return node_id, url.strip()
