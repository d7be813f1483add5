"""The transaction coordinator: InitProducerId for transactional ids,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn, transaction markers, timeouts and
transactional-id expiration. See ``coordinator.py`` for the behaviour and
``state.py`` for the state machine."""

from .config import TxnConfig
from .coordinator import (
    InitResult,
    ListedTransaction,
    ListResult,
    ProducerIdSource,
    TransactionCoordinator,
    TxnCounters,
    TxnDescription,
)
from .factory import create_transaction_coordinator, view_partition_exists
from .handlers import TransactionApis, register_transaction_apis
from .init_producer_id_api import InitProducerIdApi
from .marker_sender import (
    MarkerRouting,
    MarkerSender,
    MarkerSpec,
    MarkerTransport,
    Outcome,
    PeerMarkerTransport,
    ViewRouting,
)
from .metadata import TransactionMetadata, TxnTransit
from .state import IllegalTransition, TxnState, check_transition

__all__ = [
    "IllegalTransition",
    "InitProducerIdApi",
    "InitResult",
    "ListResult",
    "ListedTransaction",
    "MarkerRouting",
    "MarkerSender",
    "MarkerSpec",
    "MarkerTransport",
    "Outcome",
    "PeerMarkerTransport",
    "ProducerIdSource",
    "TransactionApis",
    "TransactionCoordinator",
    "TransactionMetadata",
    "TxnConfig",
    "TxnCounters",
    "TxnDescription",
    "TxnState",
    "TxnTransit",
    "ViewRouting",
    "check_transition",
    "create_transaction_coordinator",
    "register_transaction_apis",
    "view_partition_exists",
]
