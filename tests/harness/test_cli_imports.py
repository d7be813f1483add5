"""`txnchaos node` runs through the CLI modules (the `txnchaos` command, jobs/cli.py, and the
launcher's `python -m txnchaos.harness.cli node`), so importing them must stay light: a node
that imported pyarrow or librdkafka would start their threads before it pins itself to its
CPUs (`cluster up --cpus`), and pay their start-up time on every restart."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("pyarrow", "confluent_kafka", "locust", "pyspark", "jinja2", "matplotlib")


@pytest.mark.parametrize("module", ["txnchaos.harness.cli", "txnchaos.jobs.cli"])
def test_importing_the_cli_imports_no_heavy_library(module: str) -> None:
    code = (
        f"import sys, {module}\n"
        f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
