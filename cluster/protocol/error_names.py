"""Kafka's names for protocol error codes, as its clients and tools print them."""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode


def error_name(code: Any) -> str:
    """``NONE``, ``INVALID_TXN_STATE``... for an error code (an int or kio's ErrorCode);
    ``ERROR_<n>`` for a code Kafka does not define."""
    value = int(code)
    try:
        return ErrorCode(value).name.upper()
    except ValueError:
        return f"ERROR_{value}"
