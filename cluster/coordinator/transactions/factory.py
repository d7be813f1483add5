"""Wiring a :class:`TransactionCoordinator` into a node from the node's callables."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ...features import transaction_version as finalized_transaction_version
from ...metadata import ClusterView
from .config import TxnConfig
from .coordinator import ProducerIdSource, TransactionCoordinator
from .marker_sender import PeerMarkerTransport, ViewRouting


def view_partition_exists(view: Callable[[], ClusterView]) -> Callable[[str, int], bool]:
    """``partition_exists`` from the cluster view (for AddPartitionsToTxn)."""

    def exists(topic: str, partition: int) -> bool:
        meta = view().topics.get(topic)  # (ClusterView.topic, inlined: once per partition)
        return meta is not None and 0 <= partition < len(meta.leaders)

    return exists


def create_transaction_coordinator(
    data_dir: Path,
    *,
    producer_ids: ProducerIdSource,
    view: Callable[[], ClusterView],
    node_address: Callable[[int], tuple[str, int] | None],
    internal_partition_owner: Callable[[int], int | None],
    refresh_view: Callable[[], Awaitable[Any]] | None = None,
    partition_exists: Callable[[str, int], bool] | None = None,
    config: TxnConfig | None = None,
    client_id: str = "txnchaos-txn-coordinator",
    transaction_version: Callable[[], int] | None = None,
) -> TransactionCoordinator:
    """A coordinator whose markers travel over ``PeerConnection``s.

    ``view``: the node's cluster view (``source.view``); ``refresh_view``: pull a fresh
    one (``source.refresh``) after a routing error. ``node_address(node_id)``: where to
    reach a node (honouring per-peer overrides). ``internal_partition_owner(p)``: the
    node owning ``__consumer_offsets`` partition ``p`` (markers for transactional
    offsets go there). ``partition_exists`` defaults to the cluster view.
    ``transaction_version``: the finalized transaction.version (KIP-890); defaults to
    the cluster view's.
    """
    config = config or TxnConfig()
    return TransactionCoordinator(
        data_dir,
        producer_ids=producer_ids,
        marker_transport=PeerMarkerTransport(
            node_address,
            client_id=client_id,
            request_timeout_s=config.marker_request_timeout_ms / 1000,
        ),
        marker_routing=ViewRouting(view, internal_partition_owner, refresh_view),
        partition_exists=partition_exists or view_partition_exists(view),
        config=config,
        transaction_version=transaction_version or (lambda: finalized_transaction_version(view())),
    )
