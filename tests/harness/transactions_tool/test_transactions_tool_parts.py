"""Pieces of ``txnchaos transactions`` that need no cluster: the retry of coordinator
errors, the abort's coordinator epoch, and the table layout."""

from __future__ import annotations

import asyncio

import pytest

from txnchaos.harness.transactions_tool import admin, output, verbs

NOT_COORDINATOR = 16
TRANSACTIONAL_ID_NOT_FOUND = 105


def test_coordinator_errors_are_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin, "RETRY_BACKOFF_S", 0)
    answers = [NOT_COORDINATOR, NOT_COORDINATOR, None]

    async def call() -> str:
        code = answers.pop(0)
        if code is not None:
            raise admin.AdminError("moving", code)
        return "found"

    assert asyncio.run(admin._retrying(call)) == "found"
    assert answers == []


def test_other_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admin, "RETRY_BACKOFF_S", 0)
    calls = []

    async def call() -> str:
        calls.append(1)
        raise admin.AdminError("gone", TRANSACTIONAL_ID_NOT_FOUND)

    with pytest.raises(admin.AdminError, match="gone"):
        asyncio.run(admin._retrying(call))
    assert len(calls) == 1


def test_a_producer_without_a_coordinator_epoch_is_aborted_with_epoch_zero() -> None:
    assert verbs.spec_for("t", 0, 7, 3, -1).coordinator_epoch == 0
    assert verbs.spec_for("t", 0, 7, 3, 12).coordinator_epoch == 12


def test_table_columns_line_up() -> None:
    text = output.table(("Topic", "Partition"), [("orders", 1), ("x", 10)])
    assert text.splitlines() == ["Topic   Partition", "orders  1", "x       10"]
    assert output.iso(-1) == "None"
    assert output.iso(1_600_383_743_000) == "2020-09-17T23:02:23Z"


def test_state_filter_takes_kafkas_state_names_only() -> None:
    """An unknown --state-filter would match nothing and look like "no transactions":
    refused with exit code 2 before anything connects."""
    from click.testing import CliRunner

    from txnchaos.harness.cli import main

    result = CliRunner().invoke(
        main, ["transactions", "list", "--bootstrap", "127.0.0.1:1", "--state-filter", "Open"]
    )
    assert result.exit_code == 2, result.output
    assert "'Open' is not one of" in result.stderr and "Ongoing" in result.stderr


def test_bootstrap_server_is_accepted_as_kafkas_tool_spells_it() -> None:
    """--bootstrap-server HOST:PORT is --bootstrap (a closed port: the cluster is not
    reachable, exit code 2, one line)."""
    from click.testing import CliRunner

    from txnchaos.harness.cli import main

    for flag in ("--bootstrap", "--bootstrap-server"):
        result = CliRunner().invoke(main, ["transactions", "list", flag, "127.0.0.1:1"])
        assert result.exit_code == 2, result.output
        assert "not reachable" in result.stderr, result.stderr
    bad = CliRunner().invoke(main, ["transactions", "list", "--bootstrap-server", "nope"])
    assert bad.exit_code == 2 and "HOST:PORT" in bad.stderr
