"""Which cases of a long parametrized test run in the default suite (CI) and which only under
``pytest -m nightly``: CI keeps a representative of each long family within its 30 minutes
on two cores, and the nightly run keeps every case."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any

import pytest


def _key(value: Any) -> Any:
    return value[0] if isinstance(value, tuple) else value


def nightly_except(values: Sequence[Any], keep: Collection[Any]) -> list[Any]:
    """``values`` as ``parametrize`` arguments: those whose key (the value itself, or a
    tuple's first item) is in ``keep`` as they are, every other one marked ``nightly``."""
    unknown = set(keep) - {_key(v) for v in values}
    if unknown:
        raise ValueError(f"kept cases that are not parameters: {sorted(map(str, unknown))}")
    out: list[Any] = []
    for value in values:
        if _key(value) in keep:
            out.append(value)
        else:
            args = value if isinstance(value, tuple) else (value,)
            out.append(pytest.param(*args, marks=pytest.mark.nightly))
    return out
