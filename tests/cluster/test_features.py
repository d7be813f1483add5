"""UpdateFeatures validation (Kafka's FeatureControlManager rules) and the settings
that start a cluster at a transaction.version."""

from __future__ import annotations

import pytest

from txnchaos.cluster.features import (
    SAFE_DOWNGRADE,
    TRANSACTION_VERSION,
    UNSAFE_DOWNGRADE,
    UPGRADE,
    FeatureUpdate,
    finalized,
    transaction_version,
    validate_update,
    writes_tv2_records,
)
from txnchaos.cluster.metadata import ClusterView
from txnchaos.cluster.settings import NodeSettings, SettingsError

OK, INVALID_UPDATE_VERSION = 0, 95


@pytest.mark.parametrize(
    ("current", "level", "kind", "code", "reason"),
    [
        (1, 2, UPGRADE, OK, None),
        (1, 1, UPGRADE, OK, None),
        (2, 1, UPGRADE, INVALID_UPDATE_VERSION, "without setting the upgrade type"),
        (2, 0, SAFE_DOWNGRADE, OK, None),
        (2, 1, UNSAFE_DOWNGRADE, OK, None),
        (1, 2, SAFE_DOWNGRADE, INVALID_UPDATE_VERSION, "downgrade to a newer version"),
        (1, 3, UPGRADE, INVALID_UPDATE_VERSION, "levels 0 to 2"),
        (1, -1, SAFE_DOWNGRADE, INVALID_UPDATE_VERSION, "less than 0"),
        (1, 1, 7, INVALID_UPDATE_VERSION, "upgrade type"),
    ],
)
def test_transaction_version_updates(
    current: int, level: int, kind: int, code: int, reason: str | None
) -> None:
    got, message = validate_update(
        {TRANSACTION_VERSION: current}, FeatureUpdate(TRANSACTION_VERSION, level, kind)
    )
    assert got == code
    if reason is None:
        assert message is None
    else:
        assert message is not None and reason in message


def test_unknown_feature_is_refused() -> None:
    code, message = validate_update({}, FeatureUpdate("group.version", 1))
    assert code == INVALID_UPDATE_VERSION and message is not None


def test_level_zero_is_not_finalized_and_gates_tv2_records_only() -> None:
    """Level 0 keeps the coordinator's values at version 0 (no TV2 state); verification
    is the setting's alone (Kafka), so the level says nothing about it."""
    assert finalized({TRANSACTION_VERSION: 0}) == {}
    for level, tv2 in ((0, False), (1, True), (2, True)):
        view = ClusterView("c", 1, features=finalized({TRANSACTION_VERSION: level}))
        assert transaction_version(view) == level
        assert writes_tv2_records(level) is tv2
    assert writes_tv2_records(None)  # a coordinator that was told no level


def test_start_level_setting() -> None:
    assert NodeSettings().get(TRANSACTION_VERSION) == 2
    assert NodeSettings.from_pairs(["transaction.version=0"]).get(TRANSACTION_VERSION) == 0
    for bad in ("3", "-1", "two"):
        with pytest.raises(SettingsError):
            NodeSettings.from_pairs([f"transaction.version={bad}"])
