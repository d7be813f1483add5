"""Conventions of the whole command line: one duration syntax for every option that takes a
duration, ``txnchaos --version``, and no ``.hypothesis/`` directory left where it ran."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from txnchaos.harness.cli_input import Duration, parse_duration
from txnchaos.jobs.cli import main


@pytest.mark.parametrize(
    "text, unit, seconds",
    [
        ("90", "s", 90),
        ("90s", "s", 90),
        ("1.5m", "s", 90),
        ("1h30m", "s", 5400),
        ("8h", "s", 28800),
        ("250ms", "s", 0.25),
        ("2d", "s", 172800),
        (" 30M ", "s", 1800),
        ("3600000", "ms", 3600),  # a Kafka tool's flag keeps its unit for a bare number
        ("15", "m", 900),
        ("15m", "ms", 900),  # a unit says what it means, whatever the bare unit
    ],
)
def test_one_duration_syntax(text: str, unit: str, seconds: float) -> None:
    assert parse_duration(text, unit) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "soon", "5x", "0", "0s", "-1", "1h30", "m", "1..5s", "nan"])
def test_anything_else_is_refused_with_the_examples(text: str) -> None:
    with pytest.raises(ValueError, match="examples: 90, 90s"):
        parse_duration(text)


def _options(cmd: click.Command, path: str = "txnchaos") -> list[tuple[str, click.Option]]:
    out = [(path, p) for p in cmd.params if isinstance(p, click.Option)]
    if isinstance(cmd, click.Group):
        for name, sub in cmd.commands.items():
            out += _options(sub, f"{path} {name}")
    return out


def test_every_duration_option_takes_the_one_syntax() -> None:
    """An option that takes a duration (its name says duration, timeout, budget or interval)
    parses it with Duration, whatever command it belongs to."""
    durations = [
        (path, opt)
        for path, opt in _options(main)
        if re.search(r"duration|timeout|budget|interval", opt.name or "")
    ]
    assert len(durations) >= 9  # run, nightly and repro --duration, the budgets, timeouts...
    wrong = [
        f"{path} {opt.opts[0]}" for path, opt in durations if not isinstance(opt.type, Duration)
    ]
    assert not wrong, wrong
    shrink = main.commands["shrink"]
    budget = next(p for p in shrink.params if p.name == "budget")
    assert budget.type.convert("90", budget, None) == 90.0  # seconds, as everywhere else


def test_version_names_the_package_and_the_client_library() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "txnchaos.jobs.cli", "--version"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = out.splitlines()
    assert lines[0] == f"txnchaos {importlib.metadata.version('txnchaos')}"
    assert re.fullmatch(r"confluent-kafka [\d.]+ \(librdkafka [\d.]+\)", lines[1]), out
    assert lines[-1].startswith("Python 3.")


@pytest.mark.parametrize(
    "argv",
    [
        ["-m", "txnchaos.harness.cli", "--help"],
        ["-m", "txnchaos.jobs.cli", "run", "--help"],
        ["-c", "import txnchaos.harness.clients.producer"],  # what a tv2 user imports
    ],
)
def test_no_hypothesis_directory_is_left_where_it_ran(tmp_path: Path, argv: list[str]) -> None:
    """kio registers hypothesis strategies whenever hypothesis is importable, and that made
    hypothesis create .hypothesis/ in the current directory of every txnchaos process."""
    subprocess.run([sys.executable, *argv], cwd=tmp_path, capture_output=True, check=True)
    assert list(tmp_path.iterdir()) == []
